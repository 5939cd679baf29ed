"""Replays served by the program's own process, once its main module has finished and
before it tears itself down (``run/hook/ending``): where opening the device costs seconds
and one process at a time may hold it (a TPU), the program already holds it.

The requests and answers are the kept worker's (``worker.serve``): one spec a line, each
replay's output between a ``STARTS`` and an ``ENDED`` line; here they travel over two
FIFOs collect made (``run.held``), not the process's stdin and stdout, which stay the
program's. While a module replays, the process's stdout and stderr (its file descriptors:
XLA writes to them from C++) go to the answers FIFO, and what the replay changes of the
process (its folder, its temporary variables, the soft memory limit) is put back after it.

Served compiles must not write into the run's dump folder, which the program's XLA_FLAGS
name for the whole process: each compile's options send its dumps to a folder of the
replay's own (``jaxlib_adapter.dumping_to``; its ``out``, which the parent deletes). A
per-compile override of ``xla_dump_to`` is not enough: XLA's own dumps follow it, PJRT's
dump of the compile's inputs does not, and an empty one dumps the module to stdout. The
recorder writes nothing meanwhile: what the program did is recorded, what collect asked
is not the program's.

The serving ends when collect closes the requests FIFO (its stage is done, or it died), or
when no request comes for ``bound`` seconds; the process then goes on to its own exit.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import os
import resource
import select
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xla_bugkit import jaxlib_adapter
from xla_bugkit.replay.child import worker
from xla_bugkit.replay.protocol import ENDED, STARTS

DUMP = "xla-dump"  # the served compiles' own dump folder, in the replay's ``out``


def serve(requests: int, answers: int, bound: float, recorder: Any = None) -> int:
    """Serve the specs read from the ``requests`` descriptor, answering on ``answers``,
    until the requests end or none comes for ``bound`` seconds; the number served."""
    served = 0
    with _muted(recorder):
        for line in _lines(requests, bound):
            _write(answers, f"{STARTS}{served}\n")
            with _output_to(answers), _restored():
                try:
                    spec = json.loads(line)
                    _soft_memory_limit(spec.pop("memory_limit", None))
                    with jaxlib_adapter.dumping_to(Path(spec["out"]).absolute() / DUMP):
                        status = worker.replay(spec)
                except Exception:
                    import traceback

                    traceback.print_exc()
                    status = 1
            _write(answers, f"{ENDED}{served} {status}\n")
            served += 1
            gc.collect()  # the module's arrays and executables, before the next one's
    return served


def _lines(fd: int, bound: float) -> Iterator[str]:
    """The lines read from ``fd`` as they come, until it ends or is silent ``bound`` s."""
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], bound)
        if not ready:
            return
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            continue
        except OSError:
            return
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.strip():
                yield line.decode("utf-8", "replace")


def _write(fd: int, text: str) -> None:
    os.write(fd, text.encode())


@contextlib.contextmanager
def _output_to(fd: int) -> Iterator[None]:
    """The process's stdout and stderr go to ``fd`` for the block, and back after it: its
    descriptors (XLA's own lines), and Python's streams, new ones on them (the program's
    may have been replaced by streams of its own, which the replay's markers must miss)."""
    streams = (sys.stdout, sys.stderr)
    for stream in streams:
        with contextlib.suppress(Exception):
            stream.flush()
    saved = {1: os.dup(1), 2: os.dup(2)}
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout, sys.stderr = (
        open(n, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        for n in (1, 2)
    )
    try:
        yield
    finally:
        for ours in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                ours.close()  # flushed; the descriptor stays (closefd=False)
        sys.stdout, sys.stderr = streams
        for target, copy in saved.items():
            os.dup2(copy, target)
            os.close(copy)


@contextlib.contextmanager
def _restored() -> Iterator[None]:
    """What ``worker.contain`` and the memory limit change of the process, put back."""
    folder = os.getcwd()
    variables = {name: os.environ.get(name) for name in worker._TEMP_VARIABLES}
    limit = resource.getrlimit(resource.RLIMIT_AS)
    try:
        yield
    finally:
        os.chdir(folder)
        for name, value in variables.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        import tempfile

        tempfile.tempdir = None
        resource.setrlimit(resource.RLIMIT_AS, limit)


def _soft_memory_limit(memory: int | None) -> None:
    """The replay's memory limit as the soft limit alone: the program's own hard limit
    stays, so the soft one can be put back (``_restored``)."""
    if memory:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = memory if hard == resource.RLIM_INFINITY else min(memory, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def _muted(recorder: Any) -> Iterator[None]:
    """The recorder writes no record, and a crash no stack into the run's evidence, while
    collect's replays run: a crash's stack goes to the replay's output (descriptor 2)."""
    fd = getattr(recorder, "fd", -1)
    stack = getattr(recorder, "stack_file", None)
    moved = stack is not None and faulthandler.is_enabled()
    try:
        if recorder is not None:
            recorder.fd = -1
        if moved:
            faulthandler.enable(2, all_threads=True)
        yield
    finally:
        if recorder is not None:
            recorder.fd = fd
        if moved and stack is not None:
            faulthandler.enable(stack, all_threads=True)
