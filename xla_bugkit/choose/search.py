"""Search the text dumps of modules for a symbol (``collect --symbol``), on every core.

A dump tree can hold gigabytes of HLO text in thousands of small files, so the cost is
Python's per file (open, read, search, close) more than the bytes. Each file is read with
one ``readv`` into a reused buffer (chunks of ``CHUNK`` for a larger one, so memory stays at
one chunk per process) and searched with libc's ``memmem`` through ctypes.

Threads do not help here: with a few microseconds of Python per file, two threads spend
their time handing the GIL back and forth (twice as slow as one, measured). Where ``fork``
is safe (POSIX, no other Python thread in this process) and the tree is large enough to pay
for it, forked workers share the modules instead, each taking blocks of them from a pipe as
it goes, and send back what they found through another; elsewhere one thread searches alone.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import ctypes
import gc
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from xla_bugkit.choose.dumps import DumpIndex, DumpModule, Role
from xla_bugkit.proc import usable_cores

_TEXT_ROLES = (Role.BEFORE_TEXT, Role.AFTER_TEXT)
CHUNK = 4 << 20  # per read: large enough that syscalls cost nothing next to the search
_FORK_WORTH = 16 << 20  # forking costs a few ms: about the search of this many bytes...
_FILE_COST = 8 << 10  # ...counting each file as this many bytes more (its open and close)
_MAX_WORKERS = 8  # forks are made one after another: more would cost more than they save
_BLOCKS_PER_WORKER = 16  # enough that none idles long at the end


class _Texts(NamedTuple):
    """The text dumps to search, flat: built before a fork, so that a worker reads these
    few objects and not the index's (fork shares memory copy-on-write, every object read
    has its reference count written, and so each page of the index it read would be copied:
    ~50 ms for half of a 100k-file index, measured)."""

    paths: list[str]
    sizes: array.array[int]
    starts: array.array[int]  # module j's files are paths[starts[j] : starts[j + 1]]


def search_symbol(index: DumpIndex, modules: Iterable[DumpModule], text: str) -> dict[str, str]:
    """Labels of modules whose text dumps contain ``text``, with the file it was found in
    (the first such file in the module's order), in the order of ``modules``."""
    mods = tuple(modules)
    texts = _texts(mods, str(index.root))
    needle = text.encode()
    workers = min(usable_cores(), len(mods), _worth(texts))
    hits = None
    if workers > 1 and _fork_is_safe():
        hits = _forked(texts, needle, workers)
    if hits is None:  # one process: no fork here, or a worker failed
        hits = _scan(texts, [range(len(mods))], needle)
    found = {}
    for k in sorted(hits):
        module = mods[bisect.bisect_right(texts.starts, k) - 1]
        found[module.label] = texts.paths[k].rpartition("/")[2]
    return found


def _texts(mods: Sequence[DumpModule], root: str) -> _Texts:
    paths: list[str] = []
    sizes = array.array("q")
    starts = array.array("q", [0])
    for m in mods:
        for f in m.files:
            if f.role in _TEXT_ROLES and f.size:
                paths.append(f"{root}/{f.rel}")  # a Path per file costs as much as its search
                sizes.append(f.size)
        starts.append(len(paths))
    return _Texts(paths, sizes, starts)


def _fork_is_safe() -> bool:
    """A fork copies only the calling thread, so a lock another thread holds stays locked in
    the child: fork only while no other Python thread runs. Threads of C libraries are left
    out on purpose: the child runs nothing but this module's loop (no import, no logging),
    libc's allocator and OpenBLAS (whose idle thread numpy starts) handle fork themselves."""
    if not hasattr(os, "fork") or sys.platform == "darwin":  # macOS: fork without exec is unsafe
        return False
    return threading.active_count() == 1


def _worth(texts: _Texts) -> int:
    """How many processes the search is worth: each fork costs a few ms (more, the larger
    this process), so one per ``_FORK_WORTH`` of work, at most ``_MAX_WORKERS``."""
    work = sum(texts.sizes) + len(texts.sizes) * _FILE_COST
    return min(_MAX_WORKERS, 1 + work // _FORK_WORTH)


def _forked(texts: _Texts, needle: bytes, workers: int) -> list[int] | None:
    """The hits of ``workers`` processes (this one and forked children) sharing the modules
    in blocks handed out through a pipe (a few dozen: the pipe holds them all), so that none
    idles while another has a long file; None if a child failed (the caller then searches
    alone)."""
    modules = len(texts.starts) - 1
    step = -(-modules // (workers * _BLOCKS_PER_WORKER))  # ceiling division
    blocks_r, blocks_w = os.pipe()
    children: list[tuple[int, int]] = []
    try:
        os.write(blocks_w, array.array("I", range(0, modules, step)).tobytes())
        os.close(blocks_w)  # so a worker's read of the emptied pipe is the end of the work
        blocks = _blocks(blocks_r, step, modules)  # not started: each process reads its own
        for _ in range(workers - 1):
            children.append(_fork_worker(texts, blocks, needle))
        hits = _scan(texts, blocks, needle)
        while children:
            pid, results = children[-1]
            found = array.array("q", _read_all(results))  # to the end: the child has exited
            children.pop()
            os.close(results)
            if os.waitpid(pid, 0)[1] != 0:
                return None
            hits += found
        return hits
    finally:  # also on Ctrl-C: leave no child behind
        os.close(blocks_r)
        for pid, results in children:
            with contextlib.suppress(OSError):
                os.close(results)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)


def _blocks(fd: int, step: int, end: int) -> Iterator[range]:
    while len(raw := os.read(fd, 4)) == 4:  # reads of 4 bytes from a full pipe are whole
        (start,) = array.array("I", raw)
        yield range(start, min(start + step, end))


def _fork_worker(texts: _Texts, blocks: Iterable[range], needle: bytes) -> tuple[int, int]:
    results_r, results_w = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of any other thread (see above)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: search, send the hits, and leave without running any cleanup
        code = 1
        try:
            os.close(results_r)
            gc.disable()  # a collection would touch (and so copy) every page of the parent's
            data = memoryview(array.array("q", _scan(texts, blocks, needle)).tobytes())
            while data:
                data = data[os.write(results_w, data) :]
            code = 0
        finally:
            os._exit(code)
    os.close(results_w)
    return pid, results_r


def _read_all(fd: int) -> bytes:
    parts = []
    while part := os.read(fd, 1 << 16):
        parts.append(part)
    return b"".join(parts)


def _scan(texts: _Texts, blocks: Iterable[range], needle: bytes) -> list[int]:
    """Positions in ``texts.paths`` of the first file of each module (of those in
    ``blocks``) that holds ``needle``."""
    paths, sizes, starts = texts
    # No larger than the largest file: a buffer is zeroed, page by page, when it is made.
    chunk = min(CHUNK, max(sizes, default=0))
    buf = bytearray(chunk + len(needle))
    find = _finder(buf)
    hits = []
    for block in blocks:
        for m in block:
            for k in range(starts[m], starts[m + 1]):
                if _file_contains(paths[k], sizes[k], needle, buf, chunk, find):
                    hits.append(k)
                    break
    return hits


def _file_contains(
    path: str,
    size: int,
    needle: bytes,
    buf: bytearray,
    chunk: int,
    find: Callable[[int, bytes], bool],
) -> bool:
    """Whether ``path`` holds ``needle``, read ``chunk`` bytes at a time into ``buf``; the
    last ``len(needle) - 1`` bytes of each chunk are kept in front of the next, so a needle
    that straddles two chunks is found. ``size`` is what the index saw: a read that comes
    back short once that much is read is the end (a small file takes one read, not two)."""
    if not needle:
        return True  # an empty needle is in every text, even one read as nothing
    view = memoryview(buf)
    keep = total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while n := os.readv(fd, [view[keep : keep + chunk]]):
            filled = keep + n
            if find(filled, needle):
                return True
            total += n
            if n < chunk and total >= size:
                return False
            keep = min(len(needle) - 1, filled)
            buf[:keep] = bytes(view[filled - keep : filled])  # a copy: the two may overlap
        return False
    finally:
        os.close(fd)


def _finder(buf: bytearray) -> Callable[[int, bytes], bool]:
    """``find(filled, needle)``: whether ``buf[:filled]`` holds ``needle``; through libc's
    ``memmem`` where there is one, else ``bytearray.find``."""
    if _memmem is None:
        return lambda filled, needle: buf.find(needle, 0, filled) >= 0
    # The export pins buf: it cannot be resized (and moved) while the address is in use.
    pinned = ctypes.c_char.from_buffer(buf)
    address, memmem = ctypes.addressof(pinned), _memmem

    def find(filled: int, needle: bytes, _pin: ctypes.c_char = pinned) -> bool:
        return memmem(address, filled, needle, len(needle)) is not None

    return find


def _load_memmem() -> Callable[[int, int, bytes, int], int | None] | None:
    # The process's own symbols hold libc's: found without find_library's ``ldconfig -p``.
    try:
        fn = ctypes.CDLL(None).memmem
    except (OSError, AttributeError, TypeError):  # no memmem in this libc
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return fn


_memmem = _load_memmem()
