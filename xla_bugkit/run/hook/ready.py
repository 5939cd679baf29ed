"""When an execution's outputs are ready: the device's side of "busy".

jax dispatches asynchronously: ``pxla.ExecuteReplicated.__call__`` returns as soon as the
computation is enqueued, and the program blocks later (``np.asarray(x)``, ``.item()``,
``block_until_ready``), in whichever thread reads the value. The ``executed`` record says
only that dispatch returned. For each execution whose outputs were not ready by then, one
daemon thread polls them and writes ``ready`` once they are: an
execution with ``pending`` and no ``ready`` record was still running on the device when the
process ended (a hang in a worker thread that the program's own watchdog ended with
``os._exit``, say).

Loaded by file path from ``jax_patches`` (as the recorder's siblings are), inside the
program's process: it holds only weak references to the outputs, so it never keeps an
array alive that the program dropped, and never raises into the program.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import weakref
from typing import Any

POLL_SECONDS = 0.1  # how late a ``ready`` record may be
_PENDING: queue.SimpleQueue[tuple[int, list[Any]]] = queue.SimpleQueue()
_STARTED = threading.Lock()
_watcher: list[threading.Thread] = []


def leaves(out: Any) -> list[Any]:
    """The arrays an execution returned (a list of jax arrays, or one)."""
    items = out if isinstance(out, (list, tuple)) else [out]
    return [a for a in items if hasattr(a, "is_ready") and hasattr(a, "block_until_ready")]


def pending(arrays: list[Any]) -> bool:
    """Whether any of ``arrays`` is still being computed (a deleted one is not)."""
    for a in arrays:
        try:
            if not a.is_ready():
                return True
        except Exception:  # deleted or donated already: nothing left to wait for
            continue
    return False


def watch(recorder: Any, n: int, arrays: list[Any]) -> None:
    """Write ``ready`` for execution ``n`` once ``arrays`` are computed."""
    try:
        refs = [weakref.ref(a) for a in arrays]
    except TypeError:  # an array type without weak references: not watched
        return
    _PENDING.put((n, refs))
    with _STARTED:
        if not _watcher:
            thread = threading.Thread(
                target=_wait, args=(recorder,), name="xla-bugkit-ready", daemon=True
            )
            thread.start()
            _watcher.append(thread)


def _wait(recorder: Any) -> None:
    """Poll, never block in jaxlib: a daemon thread that waits inside jaxlib when the
    interpreter exits is unwound through jaxlib's C++ frames and aborts the process
    ("FATAL: exception not rethrown"). ``is_ready`` keeps the interpreter's lock, and the
    waits between polls are the interpreter's own."""
    pending: list[tuple[int, list[Any]]] = []
    while True:
        if not pending:
            pending.append(_PENDING.get())
        with contextlib.suppress(queue.Empty):
            while True:
                pending.append(_PENDING.get_nowait())
        still = []
        for n, refs in pending:
            if _computed(refs):
                recorder.write("ready", n=n)
            else:
                still.append((n, refs))
        pending = still
        if pending:
            time.sleep(POLL_SECONDS)


def _computed(refs: list[Any]) -> bool:
    for ref in refs:
        array = ref()
        # An error (its computation failed, it was deleted) ends the wait as well.
        if array is not None and pending([array]):
            return False
    return True
