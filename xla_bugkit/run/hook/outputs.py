"""Which execution made an array: the runtime's own answer to "whose error is this?".

jax dispatches asynchronously: an execution that fails after its dispatch returned hands
the program arrays that hold its error, and the next call that takes them (``spread(gap)``,
``x[0, 0]``) raises it, wrapped as ``Error dispatching computation: ...``. The hook names,
in each ``execute`` record, the earlier executions whose outputs the call takes (``fed``),
so that an error is told to the execution that made it, not to the call that met it.

Loaded by file path from ``jax_calls`` (as the recorder's siblings are), inside the
program's process: the arrays are known by identity and held only by weak references, so an
array the program dropped is forgotten with it (and its id, which Python may give again, with
it); nothing here raises into the program.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

_MADE: dict[int, tuple[int, Any]] = {}  # id(array) -> (execution n, weak reference to it)
_LOCK = threading.RLock()  # a weak reference's callback may run while it is held


def made(n: int, arrays: list[Any]) -> None:
    """Execution ``n`` returned ``arrays``."""
    for array in arrays:
        key = id(array)
        try:
            ref = weakref.ref(array, _forgetting(key))
        except TypeError:  # an array type without weak references: not followed
            continue
        with _LOCK:
            _MADE[key] = (n, ref)


def makers(args: tuple[Any, ...]) -> list[int]:
    """The executions that made any of ``args``, oldest first."""
    found = set()
    with _LOCK:
        for a in args:
            entry = _MADE.get(id(a))
            if entry is not None and entry[1]() is a:
                found.add(entry[0])
    return sorted(found)


def maker(array: Any) -> int | None:
    """The execution that made ``array``, when the hook saw it return it."""
    with _LOCK:
        entry = _MADE.get(id(array))
    return entry[0] if entry is not None and entry[1]() is array else None


def failures(args: tuple[Any, ...], ready: Any) -> list[tuple[int, str]]:
    """(n, error) for each execution that made any of ``args`` whose computed outputs hold
    the error XLA raised computing them (``ready.failed``); never waits on one still being
    computed."""
    found: dict[int, str] = {}
    for a in args:
        with _LOCK:
            entry = _MADE.get(id(a))
        if entry is None or entry[1]() is not a or entry[0] in found or ready.pending([a]):
            continue
        if (error := ready.failed([a])) is not None:
            found[entry[0]] = error
    return sorted(found.items())


def _forgetting(key: int) -> Callable[[Any], None]:
    """The callback that forgets ``id(array)`` when the array goes."""

    def forget(_: Any) -> None:
        with _LOCK:
            _MADE.pop(key, None)

    return forget
