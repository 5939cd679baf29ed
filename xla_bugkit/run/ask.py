"""Asking a run's processes what they are doing, before the run is stopped.

Each process the hook records listens on ``<pid>.ask`` (a FIFO in the processes folder)
with a thread of its own (``hook.recorder``). A byte written there makes it add a ``state``
record to its evidence: the arrays still being computed, which say what a program stuck on
a computation waits for even where its Python stack shows nothing of jax (a call that took
jax's C++ fast path, which the hook never sees).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

# How long the processes get to answer. Each answers in milliseconds unless a thread that
# holds the GIL is stuck too; then the run is stopped without the answer.
ANSWER_SECONDS = 10.0
_POLL_SECONDS = 0.05
_STATE = b'{"e": "state"'  # how the recorder's json.dumps begins a state record


def ask(folder: Path, wait: float = ANSWER_SECONDS) -> int:
    """Ask every process listening under ``folder``; return once each asked one has
    answered, or after ``wait`` seconds. Returns how many answered."""
    asked: dict[Path, int] = {}
    for fifo in sorted(folder.glob("*.ask")):
        evidence = fifo.with_suffix(".jsonl")
        try:
            size = evidence.stat().st_size
        except OSError:
            continue
        if _knock(fifo):
            asked[evidence] = size
    answered = 0
    deadline = time.monotonic() + wait
    while asked:
        for evidence, size in list(asked.items()):
            if _answered(evidence, size):
                del asked[evidence]
                answered += 1
        if not asked or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_SECONDS)
    return answered


def forget(folder: Path) -> None:
    """Remove the processes' FIFOs: nothing that later reads the folder may block on one."""
    for fifo in folder.glob("*.ask"):
        with contextlib.suppress(OSError):
            fifo.unlink()


def _knock(fifo: Path) -> bool:
    """Write the question; False when nobody listens (the process has ended)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: no reader
    except OSError:
        return False
    try:
        os.write(fd, b"?")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _answered(evidence: Path, size: int) -> bool:
    try:
        with evidence.open("rb") as f:
            f.seek(size)
            return any(line.startswith(_STATE) for line in f)
    except OSError:
        return False
