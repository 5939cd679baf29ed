"""Run probes in child processes: forked from a probe server, or as fresh processes.

The shrink parent never loads XLA. Each probe is a folder holding ``spec.json`` (what
``child`` reads) and, once the probe ends, ``output.txt`` and the arrays it saved.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_bugkit import proc
from xla_bugkit.errors import ProcessError
from xla_bugkit.shrink import server

# How long the server may take to import jax: only a broken install takes this long.
START_TIMEOUT = 600.0


@dataclass(frozen=True)
class ProbeRun:
    """How one probe's child ended; ``folder`` holds its output and arrays."""

    folder: Path
    returncode: int | None
    output: str
    timed_out: bool
    seconds: float


def package_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a probe process: this package importable, on the CPU unless
    ``JAX_PLATFORMS`` says otherwise."""
    env = dict(os.environ if base is None else base)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.pop("XLA_FLAGS", None)  # each probe sets its own
    return env


def write_spec(folder: Path, spec: Mapping[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.json"
    path.write_text(json.dumps({**spec, "out": str(folder)}))
    return path


def run_fresh(
    folder: Path,
    spec: Mapping[str, Any],
    *,
    xla_flags: str,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> ProbeRun:
    """One probe in a fresh Python process (what the pass trace needs: XLA reads its logging
    settings at start-up)."""
    path = write_spec(folder, spec)
    full_env = {**package_env(), **(env or {}), "XLA_FLAGS": xla_flags}
    argv = [sys.executable, "-m", "xla_bugkit.shrink.child", str(path)]
    done = proc.run_captured(argv, env=full_env, timeout=timeout)
    (folder / server.OUTPUT).write_text(done.output, "utf-8")
    return ProbeRun(folder, done.returncode, done.output, done.timed_out, done.duration)


class ForkServer:
    """A probe server process; ``run`` forks one child of it per probe. Use as a context
    manager: the server stops (with any probe of it) when the block ends."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        argv = [sys.executable, "-m", "xla_bugkit.shrink.server", str(os.getpid())]
        self._popen = subprocess.Popen(
            argv,
            env=package_env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if self._reply(START_TIMEOUT) is None:
            self.close()
            raise ProcessError("the probe server did not start (is jax installed?)")

    def _reply(self, timeout: float) -> dict[str, Any] | None:
        stdout = self._popen.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        line = stdout.readline() if ready else b""
        return json.loads(line) if line else None

    def run(
        self, folder: Path, spec: Mapping[str, Any], *, xla_flags: str, timeout: float
    ) -> ProbeRun:
        path = write_spec(folder, spec)
        request = {"spec": str(path), "xla_flags": xla_flags, "timeout": timeout}
        stdin = self._popen.stdin
        assert stdin is not None
        try:
            stdin.write((json.dumps(request) + "\n").encode())
            stdin.flush()
        except BrokenPipeError as e:
            raise ProcessError("the probe server stopped") from e
        # The server enforces the timeout; the margin covers only its own bookkeeping.
        reply = self._reply(timeout + 60.0)
        if reply is None:
            raise ProcessError("the probe server stopped answering")
        output_path = folder / server.OUTPUT
        output = output_path.read_text("utf-8", "replace") if output_path.exists() else ""
        return ProbeRun(
            folder,
            int(reply["returncode"]),
            output,
            bool(reply["timed_out"]),
            float(reply["seconds"]),
        )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._popen.stdin is not None:
                self._popen.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=proc.GRACE_SECONDS)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, signal.SIGKILL)
        self._popen.wait()
        if self._popen.stdout is not None:
            self._popen.stdout.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
