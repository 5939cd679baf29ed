"""Capture from inside the program: for scripts that cannot be rerun under ``collect``.

``xla_bugkit.start_capture()``, called first thing (before jax is imported), turns XLA's dumps
and logs on for this process and keeps a work dir that ``xla-bugkit bundle WORKDIR`` makes
a bundle from afterwards. XLA reads its flags once per process, so this must happen before
the backend starts.

The process forks: the child goes on running the program (it returns from
``start_capture``); the parent stays behind to copy the program's output to the terminal
and to ``run.log``, and to record how it ended in ``run.json``. A parent is needed because
a program that crashes inside XLA (an abort, a segfault) runs none of its own exit code:
only a process that waits for it learns its exit status and keeps the last lines it printed.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from xla_bugkit.collecting import workdir
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure.classify import classify
from xla_bugkit.hlo import flags
from xla_bugkit.run import rerun
from xla_bugkit.run.record import RunRecord

ACTIVE = "XLA_BUGKIT_CAPTURE"  # the work dir, once this process (or its parent) captures
_CHUNK = 1 << 16


def start_capture(work: Path | str | None = None) -> Path:
    """Turn XLA's dumps on for the rest of this program and return the work dir, which
    ``xla-bugkit bundle WORKDIR -o bug.zip`` bundles once the program has ended.

    Call it before jax (or any framework that loads XLA) is imported. ``work`` must be new
    or empty; by default a fresh folder under the user cache dir. A second call, or a call
    in a process a capturing program started, returns the work dir in force.
    """
    if os.environ.get(ACTIVE):
        return Path(os.environ[ACTIVE])
    loaded = sorted(m for m in ("jax", "jaxlib", "tensorflow", "torch_xla") if m in sys.modules)
    if loaded:
        raise BugkitError(
            f"start_capture() must run before {', '.join(loaded)} is imported: XLA reads its "
            "flags once per process (call it first thing, or use xla-bugkit collect)"
        )
    if "ipykernel" in sys.modules:
        raise BugkitError(
            "in a notebook, run %load_ext xla_bugkit, then %xla_bugkit collect after the "
            "failure: it reruns the cells in a fresh process with dumps on"
        )
    if not hasattr(os, "fork"):
        raise BugkitError("start_capture() needs os.fork; run the program under collect")
    folder = workdir.prepare(Path(work) if work is not None else None)
    env, merged = rerun.child_env(os.environ, folder / workdir.DUMP)
    (folder / workdir.DUMP).mkdir(parents=True, exist_ok=True)
    os.environ.update(env)
    os.environ[ACTIVE] = str(folder)
    _fork_supervisor(folder, merged)
    return folder


def _fork_supervisor(folder: Path, merged: flags.MergedFlags) -> None:
    """Fork; only the child returns. The parent tees the child's output and never returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    pipes = [os.pipe(), os.pipe()]  # the child's stdout and stderr
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        for target, (read, write) in zip((1, 2), pipes, strict=True):
            os.dup2(write, target)
            os.close(read)
            os.close(write)
        return
    for _, write in pipes:
        os.close(write)
    try:
        status = _supervise(pid, folder, merged, [read for read, _ in pipes], started)
    except BaseException:  # the program's own exit status must still win
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    _exit_like(status)


def _supervise(
    pid: int, folder: Path, merged: flags.MergedFlags, reads: Sequence[int], started: float
) -> int:
    # Ctrl-C reaches the whole foreground group, the program included: it decides. A
    # SIGTERM or SIGHUP sent to this process alone (a scheduler's) is passed on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: os.kill(pid, signum))
    log_path = folder / workdir.LOG
    with log_path.open("wb") as log:
        status = _tee(pid, reads, log)
    output = log_path.read_bytes().decode("utf-8", errors="replace")
    run = RunRecord(
        command=(sys.executable, *sys.argv),
        exit_status=status,
        timed_out=False,
        interrupted=status == -signal.SIGINT,
        duration=time.monotonic() - started,
        log=log_path,
        output=output,
        xla_flags=merged,
        failure=classify(output, exit_status=status),
    )
    workdir.save_run(folder, run)
    hint = f"xla-bugkit: make the bundle with: xla-bugkit bundle {folder} -o bug.zip\n"
    os.write(2, hint.encode())
    return status


def _tee(pid: int, reads: Sequence[int], log: BinaryIO) -> int:
    """Copy each pipe to the terminal stream it replaced and to ``log`` until the program
    has ended and its pipes are drained; return its exit status (negative: a signal)."""
    open_fds = dict(zip(reads, (1, 2), strict=True))
    status: int | None = None
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], 0.5)
        for fd in ready:
            data = os.read(fd, _CHUNK)
            if not data:
                del open_fds[fd]
                continue
            os.write(open_fds[fd], data)
            log.write(data)
            log.flush()
        if status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
        if status is not None and not ready:
            break  # ended, and nothing more came: a daemon it left may hold the pipes
    if status is None:
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return status


def _exit_like(status: int) -> None:
    """End this process as the program ended: with its exit code, or by its signal."""
    sys.stdout.flush()
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status if status >= 0 else 128 - status)
