"""What was worked out about a file ahead of need, kept for as long as the file is as it was.

A few costs of the bundle's largest file (its redacted copy, its sha256, how the archive
packs it) can be paid while the program still tears itself down (``run.main_end``), before
the stages that need them run. Each is remembered under the file's identity (device, inode,
size, modification time in nanoseconds): a hard link shares it, and any write changes it,
so a value is only ever found for the bytes it was worked out from. Only what is put here on
purpose is kept, the newest ``_KEPT`` of each kind.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
FileKey = tuple[int, int, int, int]
_KEPT = 64


def key_of(path: Path) -> FileKey | None:
    """The file's identity, or None when it cannot be read (then nothing is found for it)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Memo(Generic[T]):
    """Values by file identity; safe to fill from one thread and read from another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: OrderedDict[tuple[FileKey, object], T] = OrderedDict()

    def put(self, path: Path, value: T, *, tag: object = None) -> None:
        """Remember ``value`` for the file at ``path`` as it is now (and ``tag``: what else
        the value depends on)."""
        key = key_of(path)
        if key is None:
            return
        with self._lock:
            self._values[(key, tag)] = value
            while len(self._values) > _KEPT:
                self._values.popitem(last=False)

    def get(self, path: Path, *, tag: object = None) -> T | None:
        """What was put for the file at ``path`` with ``tag``, if it has not changed since."""
        key = key_of(path)
        if key is None:
            return None
        with self._lock:
            return self._values.get((key, tag))
