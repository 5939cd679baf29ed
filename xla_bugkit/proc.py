"""The one way xla-bugkit runs a child process.

Every child gets its own process group, so a timeout or Ctrl-C stops everything it started
(a shell script's grandchildren included). ``stream`` tees the output live to the terminal and
to a log file for ``collect``; ``run_captured`` keeps it in memory for replay children.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from xla_bugkit.errors import ProcessError

# Seconds a child gets to exit after SIGINT/SIGTERM before it is killed.
GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Limits:
    """Resource limits applied in the child with setrlimit (None = inherit)."""

    memory_bytes: int | None = None
    file_size_bytes: int | None = None


@dataclass(frozen=True)
class Completed:
    """How a child ended. ``returncode`` is negative for a signal, None if it never started."""

    returncode: int | None
    output: str
    timed_out: bool
    duration: float
    interrupted: bool = False


# Limits are set by a tiny launcher that then execs the command, not by preexec_fn: that
# would force a plain fork(), unsafe in a process whose threads (JAX's, say) hold locks.
_LAUNCHER = """
import os, resource, signal, sys
memory, size = (int(v) if v != "-" else None for v in sys.argv[1:3])
if memory is not None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
if size is not None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
# Python ignores these; an exec'd command must get them as usual (subprocess does the same).
for name in ("SIGPIPE", "SIGXFSZ"):
    signal.signal(getattr(signal, name), signal.SIG_DFL)
os.execvp(sys.argv[3], sys.argv[3:])
"""


def _with_limits(argv: Sequence[str], limits: Limits | None) -> list[str]:
    if limits is None or (limits.memory_bytes is None and limits.file_size_bytes is None):
        return list(argv)
    values = [str(v) if v is not None else "-" for v in (limits.memory_bytes,
                                                          limits.file_size_bytes)]  # fmt: skip
    return [sys.executable, "-c", _LAUNCHER, *values, *argv]


def _start(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    limits: Limits | None,
    stdin: int | None,
    echo: bool,
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            _with_limits(argv, limits),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=stdin,
            stdout=subprocess.PIPE,
            # One pipe keeps the order of a quiet child's output exactly (the last line is
            # the one that names the failure); a streamed child keeps its two streams apart.
            stderr=subprocess.PIPE if echo else subprocess.STDOUT,
            start_new_session=True,
        )
    except FileNotFoundError as e:
        raise ProcessError(f"cannot run {argv[0]!r}: command not found") from e
    except PermissionError as e:
        raise ProcessError(f"cannot run {argv[0]!r}: permission denied") from e


def stop_group(proc: subprocess.Popen[bytes], first: signal.Signals = signal.SIGTERM) -> None:
    """Stop the child's whole process group: ``first``, then SIGKILL after a grace period."""
    for sig in (first, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=GRACE_SECONDS)
            break
        except subprocess.TimeoutExpired:
            continue
    # Grandchildren may outlive the leader; the group must not linger.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _pump(
    source: BinaryIO, sinks: Sequence[BinaryIO], keep: list[bytes], lock: threading.Lock
) -> None:
    # os.read returns as soon as anything is there: output reaches the terminal live.
    fd = source.fileno()
    while chunk := os.read(fd, 65536):
        with lock:
            keep.append(chunk)
            for sink in sinks:
                with contextlib.suppress(OSError, ValueError):
                    sink.write(chunk)
                    sink.flush()


def _wait(proc: subprocess.Popen[bytes], timeout: float | None) -> tuple[bool, bool]:
    """Wait for the child; returns (timed_out, interrupted). Ctrl-C stops the child too."""
    try:
        proc.wait(timeout=timeout)
        return False, False
    except subprocess.TimeoutExpired:
        stop_group(proc, signal.SIGTERM)
        return True, False
    except KeyboardInterrupt:
        # The child runs in its own session, so the terminal's SIGINT reached only us.
        stop_group(proc, signal.SIGINT)
        return False, True


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    limits: Limits | None = None,
    echo: bool = False,
    log: BinaryIO | None = None,
    stdin: int | None = subprocess.DEVNULL,
) -> Completed:
    """Run ``argv`` to completion in its own process group, keeping its combined output.

    With ``echo`` the output also goes live to our stdout; with ``log`` to that file as it
    arrives, so a crash of this process still leaves the log on disk.
    """
    started = time.monotonic()
    proc = _start(argv, env=env, cwd=cwd, limits=limits, stdin=stdin, echo=echo)
    keep: list[bytes] = []
    lock = threading.Lock()
    readers = []
    for pipe, terminal in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
        if pipe is None:  # stderr merged into stdout
            continue
        sinks = [s for s in (terminal.buffer if echo else None, log) if s is not None]
        reader = threading.Thread(target=_pump, args=(pipe, sinks, keep, lock), daemon=True)
        reader.start()
        readers.append((reader, pipe))
    timed_out, interrupted = _wait(proc, timeout)
    for reader, pipe in readers:
        reader.join(timeout=GRACE_SECONDS)
        pipe.close()
    output = b"".join(keep).decode("utf-8", errors="replace")
    return Completed(proc.returncode, output, timed_out, time.monotonic() - started, interrupted)


def run_captured(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
    limits: Limits | None = None,
) -> Completed:
    """Run a child quietly (a replay, a probe), returning its output and status."""
    return run(argv, env=env, cwd=cwd, timeout=timeout, limits=limits)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C while the block runs, so both stop the child the same way."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
