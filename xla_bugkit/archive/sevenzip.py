"""Writing 7z archives with LZMA2 streams compressed side by side, one per core.

py7zr writes every member into one folder (one LZMA2 stream) compressed in the calling
thread, so it uses one core where ``7z a -mx=9`` uses all. A 7z archive may hold several
folders, each an independent stream: here the members, in ``arrange``'s order, are cut into
contiguous groups of about equal size, each group is compressed into a folder of its own in
a thread (liblzma and zlib's crc32 release the GIL), and the packed streams are then written
one after another with the header py7zr would write for them.

A cut never separates files that share content (``arrange``): a module's HLO texts repeat its
large constants before and after optimization, as its protos do in binary, and modules of
one program embed the same weights; a stream holding one copy packs the others to almost
nothing. Cutting anywhere made a training run's one-module bundle 1.38x the size of
``7z a -mx=9``'s; its texts and its protos as two streams are 1.00x, in two thirds of one
stream's time.

This uses py7zr's header classes beyond its public API (checked on 1.x): ``supported()``
says whether the installed py7zr has them, and the caller falls back to one stream.
"""

from __future__ import annotations

import bisect
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any, BinaryIO

import py7zr

# Below this, one stream: a cut would cost more in ratio than the threads save in time.
PARALLEL_FROM = 2 << 20
# Per file: (arcname, input size, packed size, crc32), in archive order.
_Packed = tuple[str, int, int, int]
OpenSource = Callable[[Path], AbstractContextManager[tuple[BinaryIO, int]]]
Filters = Callable[[int], list[dict[str, int]]]


def supported() -> bool:
    """Whether the installed py7zr has the internals ``write_parallel`` relies on."""
    return py7zr.__version__.startswith("1.") and hasattr(py7zr.SevenZipFile, "_write_header")


def workers(total: int) -> int:
    """How many streams to compress ``total`` bytes in (1: the plain py7zr way)."""
    if total < PARALLEL_FROM or not supported():
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, total // (PARALLEL_FROM // 2)))


Family = tuple[int, str]  # (kind, the first module of its group): see ``arrange``


def kind(arcname: str) -> int:
    """HLO texts, protos and arrays, the rest: files of different kinds share no content
    (a constant is decimal in a text, binary in a proto)."""
    if arcname.endswith(".txt"):
        return 0
    return 1 if arcname.endswith((".pb", ".npz")) else 2


def arrange(sources: Sequence[tuple[str, Path]]) -> tuple[list[tuple[str, Path]], list[Family]]:
    """``sources`` in the order they go into the archive, and each one's family: its kind,
    and the group of modules it shares content with (``_module_groups``); a member outside
    ``modules/`` is its own. What compresses together sits together, and ``groups`` cuts
    only between families."""
    group = _module_groups(sources)
    families = [(kind(name), group.get((kind(name), _module(name)), name)) for name, _ in sources]
    order = sorted(range(len(sources)), key=lambda i: (families[i], sources[i][0]))
    return [sources[i] for i in order], [families[i] for i in order]


def _module(arcname: str) -> str:
    parts = arcname.split("/")
    return "/".join(parts[:2]) if parts[0] == "modules" and len(parts) > 2 else ""


# Content that two modules' files share: a long line of HLO text (a large constant,
# ``--xla_dump_large_constants``), or in protos and arrays windows of varied bytes after
# an anchor byte (the weights in the snapshots of a training step's modules). Enough of them
# in common and the modules are one group.
_LONG_LINE = 1024
_ANCHOR, _WINDOW, _VARIED = b"\xa7", 48, 24  # 1 in 256 positions of random bytes
_SHARED = (1, 4, 1)  # by kind: fingerprints in common that join two modules


def _module_groups(sources: Sequence[tuple[str, Path]]) -> dict[tuple[int, str], str]:
    """(kind, module folder) -> its group, named by its first module: modules that share
    content in files of that kind, directly or through another module."""
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def root(m: tuple[int, str]) -> tuple[int, str]:
        while parent[m] != m:
            parent[m] = parent[parent[m]]
            m = parent[m]
        return m

    owner: dict[tuple[int, int], tuple[int, str]] = {}
    common: dict[tuple[tuple[int, str], tuple[int, str]], int] = {}
    for name, path in sources:
        module = _module(name)
        if not module:
            continue
        k = kind(name)
        me = parent.setdefault((k, module), (k, module))
        for print_ in _fingerprints(path, k):
            other = owner.setdefault((k, print_), me)
            pair = (min(other, me), max(other, me))
            common[pair] = common.get(pair, 0) + 1
            a, b = root(other), root(me)
            if a != b and common[pair] >= _SHARED[k]:
                parent[max(a, b)] = min(a, b)
    return {m: root(m)[1] for m in parent}


def _fingerprints(path: Path, k: int) -> set[int]:
    try:
        if k == 0:
            with path.open("rb") as f:
                return {hash(line) for line in f if len(line) >= _LONG_LINE}
        if k != 1:
            return set()
        data = path.read_bytes()
    except OSError:  # the writer reports it, where it reads the file for the archive
        return set()
    found = set()
    at = data.find(_ANCHOR)
    while at >= 0:
        window = data[at + 1 : at + 1 + _WINDOW]
        if len(window) == _WINDOW and len(set(window)) >= _VARIED:
            found.add(hash(window))
        at = data.find(_ANCHOR, at + 1)
    return found


def groups(sizes: Sequence[int], n: int, families: Sequence[object] | None = None) -> list[range]:
    """Cut indices ``0..len(sizes)`` into at most ``n`` contiguous runs of about equal bytes:
    each cut falls at the boundary nearest its share, before or after a large member, and
    only where ``families`` (one per member; default: all different) changes."""
    prefix = list(itertools.accumulate(sizes, initial=0))
    allowed = [
        i for i in range(1, len(sizes)) if families is None or families[i - 1] != families[i]
    ]
    total, bounds = prefix[-1], [0]
    for k in range(1, n):
        if not allowed:
            break
        target = total * k / n
        at = bisect.bisect_left([prefix[i] for i in allowed], target)
        # The allowed boundary nearest the target, before or after it.
        near = [allowed[j] for j in (at - 1, at) if 0 <= j < len(allowed)]
        cut = min(near, key=lambda i: abs(prefix[i] - target))
        if bounds[-1] < cut:
            bounds.append(cut)
    bounds.append(len(sizes))
    return [range(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def write_parallel(
    f: BinaryIO,
    sources: Sequence[tuple[str, Path]],
    sizes: Sequence[int],
    n: int,
    open_source: OpenSource,
    filters: Filters,
    families: Sequence[Family],
) -> None:
    """Write ``sources`` (arcname, path; ``sizes`` their sizes) to ``f`` as a 7z archive of up
    to ``n`` folders compressed at once; ``filters(group_bytes)`` gives each folder's filters."""
    runs = groups(sizes, n, families)
    sz = py7zr.SevenZipFile(f, "w", filters=filters(max(sum(sizes[i] for i in r) for r in runs)))
    header: Any = sz.header
    folders = []
    for run in runs:
        header._initialized = False  # initialize() then appends a new folder
        folder = header.initialize()
        folder.prepare_coderinfo(filters(sum(sizes[i] for i in run)))
        folders.append(folder)
    with ThreadPoolExecutor(len(runs), thread_name_prefix="xla-bugkit-7z") as pool:
        jobs = [
            pool.submit(_compress, folder, [sources[i] for i in run], open_source)
            for folder, run in zip(folders, runs, strict=True)
        ]
        done = [job.result() for job in jobs]  # all of them, or the first error
    try:
        for g, (folder, (packed, stream)) in enumerate(zip(folders, done, strict=True)):
            _add_folder(sz, header, g, folder, packed)
            stream.seek(0)
            shutil.copyfileobj(stream, f, 1 << 20)
    finally:
        for _, stream in done:
            stream.close()
    header._initialized = False  # every folder is flushed: close() writes only the header
    sz.close()


def _compress(
    folder: Any, sources: Sequence[tuple[str, Path]], open_source: OpenSource
) -> tuple[list[_Packed], IO[bytes]]:
    """Compress ``sources`` into one stream with ``folder``'s compressor (in a worker)."""
    stream = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 (closed by caller)
    try:
        packed = []
        compressor = folder.get_compressor()
        for arcname, src in sources:
            with open_source(src) as (reader, _):
                insize, outsize, crc = compressor.compress(reader, stream)
            packed.append((arcname, insize, outsize, crc))
        tail = compressor.flush(stream)
        if packed:  # py7zr counts the flushed bytes to the last member
            arcname, insize, outsize, crc = packed[-1]
            packed[-1] = (arcname, insize, outsize + tail, crc)
    except BaseException:
        stream.close()
        raise
    return packed, stream


def _add_folder(sz: Any, header: Any, g: int, folder: Any, packed: list[_Packed]) -> None:
    """The header entries py7zr's writer makes for ``packed``, the members of folder ``g``."""
    sub, pack = header.main_streams.substreamsinfo, header.main_streams.packinfo
    for arcname, insize, outsize, crc in packed:
        info = sz._make_file_info_from_name(None, insize, arcname)
        info["maxsize"], info["digest"] = outsize, crc
        header.files_info.files.append(info)
        header.files_info.emptyfiles.append(info["emptystream"])
        sz.files.append(info)
        sub.digestsdefined.append(True)
        sub.digests.append(crc)
        sub.unpacksizes.append(insize)
        sub.num_unpackstreams_folders[g] += 1
    compressor = folder.get_compressor()
    pack.numstreams += 1
    if pack.enable_digests:
        pack.crcs.append(compressor.digest)
        pack.digestdefined.append(True)
    pack.packsizes.append(compressor.packsize)
    folder.unpacksizes = compressor.unpacksizes
