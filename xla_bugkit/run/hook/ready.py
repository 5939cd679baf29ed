"""When an execution's outputs are ready: the device's side of "busy".

jax dispatches asynchronously: ``pxla.ExecuteReplicated.__call__`` returns as soon as the
computation is enqueued, and the program blocks later (``np.asarray(x)``, ``.item()``,
``block_until_ready``), in whichever thread reads the value. The ``executed`` record says
only that dispatch returned. For each execution whose outputs were not ready by then, one
daemon thread polls them and writes ``ready`` once they are (with the ``error`` XLA raised
computing them, which the program meets only when it reads them): an
execution with ``pending`` and no ``ready`` record was still running on the device when the
process ended (a hang in a worker thread that the program's own watchdog ended with
``os._exit``, say). Where the program itself waits on outputs (``block_until_ready``,
``jax.block_until_ready``, ``np.asarray``, ``float``, ``.item()``, ``jax.device_get``) and
the wait raises XLA's error, the ``ready`` record with that ``error`` is written there and
then (``patch_waits``): a program that catches it and drops the outputs before it exits
leaves nothing for a later pass to read.

Loaded by file path from ``jax_calls`` (as the recorder's siblings are), inside the
program's process: it holds only weak references to the outputs, so it never keeps an
array alive that the program dropped, and never raises into the program.
"""

from __future__ import annotations

import atexit
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
            # A program that reads a failed output and exits at once (its own message, then
            # sys.exit) ends before the next poll: the last pass is at exit.
            atexit.register(settle, recorder)


def _wait(recorder: Any) -> None:
    """Poll, never block in jaxlib: a daemon thread that waits inside jaxlib when the
    interpreter exits is unwound through jaxlib's C++ frames and aborts the process
    ("FATAL: exception not rethrown"). ``is_ready`` keeps the interpreter's lock, and the
    waits between polls are the interpreter's own; so the error of an output is read only
    from the program's own threads (``settle``), never here: reading it waits in jaxlib."""
    while True:
        if _settle(recorder, errors=False):
            time.sleep(POLL_SECONDS)
        else:
            first = _PENDING.get()  # nothing under way: wait for the next execution
            with _SETTLING:
                _WATCHED.append(first)


def patch_waits(recorder: Any, outputs: Any) -> None:
    """Record XLA's error where the program's own wait on an execution's outputs raises it
    (``met``): ``jax.Array.block_until_ready`` (and ``jax.block_until_ready`` of one array),
    the batched wait of ``jax.block_until_ready`` over several, the host copy of
    ``jax.device_get``, and ``_value``, under ``np.asarray``, ``float``, ``.item()``,
    ``.tolist()``. Each patch does what the original did, and raises what it raised."""
    from jax._src import array as jax_array

    cls = jax_array.ArrayImpl
    _WAIT[:] = [cls.block_until_ready]

    def raising_met(original: Any) -> Any:
        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(self, *args, **kwargs)
            except Exception as e:
                met(recorder, outputs, [self], e)
                raise

        return wait

    for name in ("block_until_ready", "copy_to_host_async"):
        if callable(original := getattr(cls, name, None)):
            setattr(cls, name, raising_met(original))
    value = cls.__dict__.get("_value")
    if isinstance(value, property) and value.fget is not None:
        setattr(cls, "_value", property(raising_met(value.fget), doc=value.__doc__))  # noqa: B010
    from jaxlib import xla_client

    batched = getattr(xla_client, "batched_block_until_ready", None)
    if callable(batched):

        def batched_block_until_ready(arrays: Any, *rest: Any, **kwargs: Any) -> Any:
            try:
                return batched(arrays, *rest, **kwargs)
            except Exception as e:
                met(recorder, outputs, [a for a in arrays if not pending([a])], e)
                raise

        setattr(xla_client, "batched_block_until_ready", batched_block_until_ready)  # noqa: B010


def met(recorder: Any, outputs: Any, arrays: list[Any], e: Exception) -> None:
    """The program's wait on ``arrays`` raised ``e``: where it is XLA's error, a ``ready``
    record with it for each execution (that the hook saw return them) whose outputs among
    ``arrays`` hold an error, once each. Never raises into the program."""
    try:
        if type(e).__name__ not in _XLA_ERRORS:
            return
        for array in arrays:
            n = outputs.maker(array)
            if n is None or n in _MET or deleted(array):
                continue  # a wait on a donated or deleted array: the program's use of jax
            error = said(e) if len(arrays) == 1 else failed([array])
            if error is None:
                continue
            with _SETTLING:
                _MET.add(n)
            recorder.write("ready", n=n, error=error)
    except Exception:  # a record lost is better than a program broken
        pass


# The wait of jax's own (``block_until_ready`` as jax defined it), which the hook's reads use:
# the program's (``patch_waits``) records what it meets. The executions whose error the
# program's own wait met and a ``ready`` record said.
_WAIT: list[Any] = []
_MET: set[int] = set()


# The executions whose outputs were being computed at the last pass; those the watcher found
# computed, whose error (if any) a pass from the program's own thread reads; the lock of a
# pass (the watcher's, or one from the program's thread: its sys.exit, atexit).
_WATCHED: list[tuple[int, list[Any]]] = []
_UNREAD: list[tuple[int, list[Any]]] = []
_SETTLING = threading.Lock()


def settle(recorder: Any) -> None:
    """One pass now, from the program's own thread, errors read: ``ending`` calls it as the
    program asks sys.exit to end it, while the outputs it read are still alive; atexit, for
    outputs still held then."""
    _settle(recorder, errors=True)
    with _SETTLING:
        for n, refs in _UNREAD:
            if n in _MET:
                continue
            if (error := failed([a for ref in refs if (a := ref()) is not None])) is not None:
                recorder.write("ready", n=n, error=error)
        _UNREAD.clear()


def _settle(recorder: Any, *, errors: bool) -> bool:
    """Write ``ready`` for each watched execution whose outputs are computed, with the
    error that computing them raised where ``errors`` (else kept in ``_UNREAD`` for a pass
    that reads it); whether any is still being computed."""
    with _SETTLING:
        with contextlib.suppress(queue.Empty):
            while True:
                _WATCHED.append(_PENDING.get_nowait())
        still = []
        for n, refs in _WATCHED:
            if n in _MET:  # the program's own wait met its error, and said it
                continue
            if not _computed(refs):
                still.append((n, refs))
            elif not errors:
                recorder.write("ready", n=n)
                _keep_unread(n, refs)
            elif (error := failed([a for ref in refs if (a := ref()) is not None])) is not None:
                recorder.write("ready", n=n, error=error)
            else:
                recorder.write("ready", n=n)
        _WATCHED[:] = still
        return bool(still)


def _keep_unread(n: int, refs: list[Any]) -> None:
    """Keep execution ``n``'s outputs for a pass that reads their error: at most
    ``_UNREAD_KEPT`` (a long loop's steps are many), the latest, those the program still holds."""
    _UNREAD.append((n, refs))
    if len(_UNREAD) > _UNREAD_KEPT:
        _UNREAD[:] = [(m, r) for m, r in _UNREAD if any(ref() is not None for ref in r)]
        del _UNREAD[: max(0, len(_UNREAD) - _UNREAD_KEPT // 2)]


_UNREAD_KEPT = 256


def _computed(refs: list[Any]) -> bool:
    for ref in refs:
        array = ref()
        # An error (its computation failed, it was deleted) ends the wait as well.
        if array is not None and pending([array]):
            return False
    return True


def failed(arrays: list[Any]) -> str | None:
    """The error XLA raised computing ``arrays``, which are ready (not ``pending``): what
    the program meets when it reads them (``block_until_ready``, ``np.asarray``), said as an
    ``executed`` record's ``error``. Waiting on an array that is ready returns at once."""
    for array in arrays:
        if deleted(array):
            continue  # donated to a later call, or deleted: nothing of its own to read
        try:
            _WAIT[0](array) if _WAIT else array.block_until_ready()
        except Exception as e:  # a deleted array raises too: only XLA's errors count
            # The program may donate it between the check and the wait: the error the
            # hook's own wait then meets is the hook's, never the computation's.
            if type(e).__name__ in _XLA_ERRORS and not deleted(array):
                return said(e)
    return None


def deleted(array: Any) -> bool:
    """Whether ``array``'s buffers are gone (donated to a call, or deleted): waiting on it
    raises an error of the waiter's, not of the execution that computed it."""
    try:
        return bool(array.is_deleted())
    except Exception:
        return False


def said(e: Exception) -> str:
    """An error as an ``executed`` or ``ready`` record's ``error`` says it: its type's name
    and its first line."""
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0][:300] if first else ''}"


# What jax (and, before 0.5, jaxlib) raise for an XLA status.
_XLA_ERRORS = frozenset({"JaxRuntimeError", "XlaRuntimeError"})
