"""When an execution's outputs are ready: the device's side of "busy".

jax dispatches asynchronously: ``pxla.ExecuteReplicated.__call__`` returns as soon as the
computation is enqueued, and the program blocks later (``np.asarray(x)``, ``.item()``,
``block_until_ready``), in whichever thread reads the value. The ``executed`` record says
only that dispatch returned. For each execution whose outputs were not ready by then, one
daemon thread waits on them, in dispatch order, and writes ``ready`` once they are: an
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
import weakref
from typing import Any

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
    while True:
        n, refs = _PENDING.get()
        for ref in refs:
            array = ref()
            if array is None:
                continue
            # An error (its computation failed, it was deleted) ends the wait as well.
            with contextlib.suppress(Exception):
                array.block_until_ready()
            del array
        recorder.write("ready", n=n)
