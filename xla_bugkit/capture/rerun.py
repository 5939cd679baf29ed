"""Rerun the user's command with dumps on, and record how it ended."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import flags, proc
from xla_bugkit.failure import Failure, classify


@dataclass(frozen=True)
class RunRecord:
    """One rerun of the user's command: what ran, how it ended, where its output is."""

    command: tuple[str, ...]
    exit_status: int | None
    timed_out: bool
    interrupted: bool
    duration: float
    log: Path
    output: str
    xla_flags: flags.MergedFlags
    failure: Failure


def child_env(base: Mapping[str, str], dump_dir: Path) -> tuple[dict[str, str], flags.MergedFlags]:
    """The environment for the rerun: the user's, plus what makes XLA and JAX tell all."""
    env = dict(base)
    merged = flags.merge(base.get("XLA_FLAGS"), dump_dir)
    env["XLA_FLAGS"] = merged.value
    # Names of what was compiled, in order: the strongest evidence of which module failed.
    env["JAX_LOG_COMPILES"] = "1"
    # A persistent-cache hit compiles nothing and so dumps nothing.
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    # Tiny computations are dumped too: the failing one may be tiny.
    env.setdefault("JAX_COMPILER_DETAILED_LOGGING_MIN_OPS", "0")
    # Full tracebacks show whether the error came from compiling or from running.
    env.setdefault("JAX_TRACEBACK_FILTERING", "off")
    # Pallas/Mosaic TPU kernels dump through libtpu's own flags.
    mosaic = flags.join([f"--xla_mosaic_dump_to={dump_dir / 'mosaic'}"])
    env["LIBTPU_INIT_ARGS"] = f"{base.get('LIBTPU_INIT_ARGS', '')} {mosaic}".strip()
    env["PYTHONUNBUFFERED"] = "1"
    return env, merged


def rerun(
    command: Sequence[str],
    *,
    dump_dir: Path,
    log_path: Path,
    timeout: float | None,
    echo: bool,
    base_env: Mapping[str, str] | None = None,
) -> RunRecord:
    """Run ``command`` with dumps into ``dump_dir``; its output goes live to the terminal
    (``echo``) and to ``log_path`` as it arrives."""
    env, merged = child_env(os.environ if base_env is None else base_env, dump_dir)
    dump_dir.mkdir(parents=True, exist_ok=True)
    with proc.sigterm_as_interrupt(), log_path.open("wb") as log:
        done = proc.run(command, env=env, timeout=timeout, echo=echo, log=log, stdin=None)
    failure = classify(
        done.output,
        exit_status=done.returncode,
        timed_out=done.timed_out,
        interrupted=done.interrupted,
    )
    return RunRecord(
        command=tuple(command),
        exit_status=done.returncode,
        timed_out=done.timed_out,
        interrupted=done.interrupted,
        duration=done.duration,
        log=log_path,
        output=done.output,
        xla_flags=merged,
        failure=failure,
    )
