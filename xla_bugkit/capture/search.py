"""Search the text dumps of modules for a symbol (``collect --symbol``), on every core.

A dump tree can hold gigabytes of HLO text. Files are read into a reused buffer in chunks
(``readinto`` releases the GIL) and searched with libc's ``memmem`` through ctypes (a foreign
call releases the GIL too), so threads search files side by side as ripgrep does, and memory
stays at one chunk per thread whatever the size of a file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from xla_bugkit.capture.dumps import DumpIndex, DumpModule, Role

_TEXT_ROLES = (Role.BEFORE_TEXT, Role.AFTER_TEXT)
CHUNK = 4 << 20  # per read: large enough that syscalls cost nothing next to the search
_SLICES_PER_THREAD = 8  # work is split finer than the threads, so that none idles at the end

_Job = tuple[str, list[str]]  # a module's label and its text dumps, in the module's order


def search_symbol(index: DumpIndex, modules: Iterable[DumpModule], text: str) -> dict[str, str]:
    """Labels of modules whose text dumps contain ``text``, with the file it was found in
    (the first such file in the module's order), in the order of ``modules``."""
    needle = text.encode()
    jobs: list[_Job] = []
    root = str(index.root)  # plain strings: a Path per file costs as much as searching it
    for module in modules:
        paths = [f"{root}/{f.rel}" for f in module.files if f.role in _TEXT_ROLES and f.size]
        if paths:
            jobs.append((module.label, paths))
    threads = min(_cores(), len(jobs))
    if threads <= 1:
        return dict(_search(jobs, needle))
    step = -(-len(jobs) // (threads * _SLICES_PER_THREAD))  # ceiling division
    slices = [jobs[i : i + step] for i in range(0, len(jobs), step)]
    with ThreadPoolExecutor(threads, thread_name_prefix="xla-bugkit-search") as pool:
        found: dict[str, str] = {}
        for part in pool.map(lambda s: _search(s, needle), slices):
            found.update(part)
    return found


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _search(jobs: Sequence[_Job], needle: bytes) -> list[tuple[str, str]]:
    buf = bytearray(CHUNK + len(needle))
    find = _finder(buf)
    found = []
    for label, paths in jobs:
        for path in paths:
            if _file_contains(path, needle, buf, find):
                found.append((label, path.rpartition("/")[2]))
                break
    return found


def _file_contains(
    path: str, needle: bytes, buf: bytearray, find: Callable[[int, bytes], bool]
) -> bool:
    """Whether ``path`` holds ``needle``, read ``CHUNK`` bytes at a time into ``buf``; the
    last ``len(needle) - 1`` bytes of each chunk are kept in front of the next, so a needle
    that straddles two chunks is found."""
    view = memoryview(buf)
    keep = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view[keep : keep + CHUNK]):
            filled = keep + n
            if find(filled, needle):
                return True
            keep = min(len(needle) - 1, filled) if needle else 0
            buf[:keep] = bytes(view[filled - keep : filled])  # a copy: the two may overlap
    return not needle  # an empty needle is in every text, even one read as nothing


def _finder(buf: bytearray) -> Callable[[int, bytes], bool]:
    """``find(filled, needle)``: whether ``buf[:filled]`` holds ``needle``; through libc's
    ``memmem`` (the GIL released) where there is one, else ``bytearray.find``."""
    if _memmem is None:
        return lambda filled, needle: buf.find(needle, 0, filled) >= 0
    # The export pins buf: it cannot be resized (and moved) while the address is in use.
    pinned = ctypes.c_char.from_buffer(buf)
    address, memmem = ctypes.addressof(pinned), _memmem

    def find(filled: int, needle: bytes, _pin: ctypes.c_char = pinned) -> bool:
        return memmem(address, filled, needle, len(needle)) is not None

    return find


def _load_memmem() -> Callable[[int, int, bytes, int], int | None] | None:
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name).memmem  # CDLL, not PyDLL: the call releases the GIL
    except (OSError, AttributeError, TypeError):  # no libc by that name, or no memmem
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return fn


_memmem = _load_memmem()
