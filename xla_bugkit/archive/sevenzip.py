"""Writing 7z archives with their streams compressed side by side, one per core.

py7zr writes every member into one folder (one LZMA2 stream) compressed in the calling
thread, so it uses one core where ``7z a -mx=9`` uses all. A 7z archive may hold several
folders, each an independent stream: here the members, in ``packing.arrange``'s order, are
cut into contiguous groups of about equal size (``packing.groups``), each group is compressed
into a folder of its own in a thread (liblzma and zlib's crc32 release the GIL), and the
packed streams are then written one after another with the header py7zr would write for them.

A cut never separates files that share content (``packing.arrange``): a module's HLO texts
repeat its large constants before and after optimization, as its protos do in binary, and
modules of one program embed the same weights; a stream holding one copy packs the others to almost
nothing. Cutting anywhere made a training run's one-module bundle 1.38x the size of
``7z a -mx=9``'s; its texts and its protos as two streams are 1.00x, in two thirds of one
stream's time.

A large member that LZMA cannot pack much better than Deflate (the random-looking floats of
a snapshot's weights, which repeat nowhere else) goes last, in a Deflate folder, which every
7z reader has: liblzma works through such data at ~3 MB/s to save ~0.5% more than Deflate
at ~30 MB/s. On a typical bundle (two snapshots of 4.2 and 2.1 MB) that took the archive
from 1.96 s to 0.60 s for 0.4% more bytes. Where the archive has room for them as they
are (the size budget), such members are stored instead: Deflate took half a second to save
9% of a training step's 17 MB of arguments.

This uses py7zr's header classes beyond its public API (checked on 1.x): ``supported()``
says whether the installed py7zr has them, and the caller falls back to one stream.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

import py7zr

from xla_bugkit.archive import packing
from xla_bugkit.proc import usable_cores

# Below this, one stream: a cut would cost more in ratio than the threads save in time.
PARALLEL_FROM = 2 << 20
# Per file: (arcname, input size, packed size, crc32), in archive order.
_Packed = tuple[str, int, int, int]
# A source file and its size; its reads counted for the progress, unless told not to count.
OpenSource = Callable[[Path, bool], AbstractContextManager[tuple[BinaryIO, int]]]
Filters = Callable[[int], list[dict[str, int]]]


def supported() -> bool:
    """Whether the installed py7zr has the internals ``write_parallel`` relies on."""
    return py7zr.__version__.startswith("1.") and hasattr(py7zr.SevenZipFile, "_write_header")


def workers(total: int) -> int:
    """How many streams to compress ``total`` bytes in (1: the plain py7zr way)."""
    if total < PARALLEL_FROM or not supported():
        return 1
    return max(1, min(usable_cores(), total // (PARALLEL_FROM // 2)))


def write_parallel(
    f: BinaryIO,
    sources: Sequence[tuple[str, Path]],
    sizes: Sequence[int],
    n: int,
    open_source: OpenSource,
    filters: Filters,
    families: Sequence[packing.Family],
    *,
    store: bool = False,
) -> None:
    """Write ``sources`` (arcname, path; ``sizes`` their sizes) to ``f`` as a 7z archive of
    folders compressed up to ``n`` at once; ``filters(group_bytes)`` gives an LZMA2 folder's
    filters. Members Deflate packs as well (``packing.dense``) go last, in Deflate folders,
    or, where ``store`` (room for them as they are), those it would pack little, stored."""
    with ThreadPoolExecutor(n, thread_name_prefix="xla-bugkit-7z") as pool:
        dense = packing.dense(sources, sizes, families, pool, store=store)
        order = sorted(range(len(sources)), key=lambda i: i in dense)  # stable
        segments = _segments(
            [sizes[i] for i in order],
            n,
            [families[i] for i in order],
            [dense.get(i) for i in order],
        )
        # The largest LZMA2 folder's filters, as py7zr sizes them (with a smaller dictionary here,
        # glibc placed the encoders so that the peak RSS grew 16 MB on the benchmark's tree).
        largest = max((seg.size for seg in segments if seg.method is None), default=0)
        sz = py7zr.SevenZipFile(f, "w", filters=filters(largest))
        header: Any = sz.header
        folders = []
        for seg in segments:
            header._initialized = False  # initialize() then appends a new folder
            folder = header.initialize()
            folder.prepare_coderinfo(_CODERS[seg.method] if seg.method else filters(seg.size))
            folders.append(folder)
        members = [[sources[order[i]] for i in seg.members] for seg in segments]
        # The costliest first: the pool is then never left with one long stream at the end.
        jobs = {
            g: pool.submit(
                _store if seg.method == packing.STORE else _compress,
                folders[g],
                members[g],
                open_source,
            )
            for g, seg in sorted(enumerate(segments), key=lambda gs: -gs[1].cost)
        }
        done = [jobs[g].result() for g in range(len(segments))]  # all, or the first error
    try:
        for g, (packed, stream) in enumerate(done):
            _add_folder(sz, header, g, folders[g], packed)
            if stream is None:  # stored: the folder's bytes are its files, read once more
                for _, src in members[g]:
                    with open_source(src, False) as (reader, _):
                        shutil.copyfileobj(reader, f, 1 << 20)
                continue
            stream.seek(0)
            shutil.copyfileobj(stream, f, 1 << 20)
    finally:
        for _, stream in done:
            if stream is not None:
                stream.close()
    header._initialized = False  # every folder is flushed: close() writes only the header
    close(sz)


# py7zr packs an archive's header (the member names and sizes: a few KB) with LZMA2 at
# preset 7, whose 8 MiB dictionary takes the encoder ~20 ms to set up; with a 64 KiB one
# the same preset packs such a header as small (3 bytes more on a training step's bundle).
_HEADER_FILTERS = [{"id": py7zr.FILTER_LZMA2, "preset": 7, "dict_size": 1 << 16}]


def close(sz: py7zr.SevenZipFile) -> None:
    """``sz.close()``, its header packed with ``_HEADER_FILTERS`` where py7zr has the
    setting (its ``DEFAULT_FILTERS``, checked on 1.x)."""
    defaults: Any = type(getattr(py7zr.properties, "DEFAULT_FILTERS", None))
    before = getattr(defaults, "ENCODED_HEADER_FILTER", None)
    if before is None:
        sz.close()
        return
    defaults.ENCODED_HEADER_FILTER = _HEADER_FILTERS
    try:
        sz.close()
    finally:
        defaults.ENCODED_HEADER_FILTER = before


@dataclass(frozen=True)
class _Segment:
    """The members (indices, in archive order) of one folder, and how it is compressed."""

    members: range
    method: str | None  # packing.DEFLATE, packing.STORE, or None for LZMA2
    size: int
    cost: int  # bytes, counted at 1/_SPEEDUP[method] of LZMA2's


def _segments(
    sizes: Sequence[int],
    n: int,
    families: Sequence[packing.Family],
    methods: Sequence[str | None],
) -> list[_Segment]:
    """The folders: ``packing.groups`` of about equal cost, each split where the method
    changes; a member deflated or stored is a family of its own."""
    costs = [s // _SPEEDUP[m] if m else s for s, m in zip(sizes, methods, strict=True)]
    pairs = enumerate(zip(families, methods, strict=True))
    own = [(packing.DENSE, str(i)) if m else family for i, (family, m) in pairs]
    segments = []
    for run in packing.groups(costs, n, own):
        for method, members in itertools.groupby(run, key=lambda i: methods[i]):
            seg = list(members)
            size, cost = sum(sizes[i] for i in seg), sum(costs[i] for i in seg)
            segments.append(_Segment(range(seg[0], seg[-1] + 1), method, size, cost))
    return segments


def _store(
    folder: Any, sources: Sequence[tuple[str, Path]], open_source: OpenSource
) -> tuple[_Folder, None]:
    """The sizes and checksums of ``sources``, stored as they are: the writer then copies
    them into the archive straight from their files (in a worker)."""
    packed, digest = [], 0
    for arcname, src in sources:
        crc = size = 0
        with open_source(src, True) as (reader, _):
            while chunk := reader.read(1 << 20):
                crc, size = zlib.crc32(chunk, crc), size + len(chunk)
                digest = zlib.crc32(chunk, digest) if len(sources) > 1 else crc
        packed.append((arcname, size, size, crc))
    total = sum(p[1] for p in packed)
    return _Folder(packed, digest, total, [total]), None


def _compress(
    folder: Any, sources: Sequence[tuple[str, Path]], open_source: OpenSource
) -> tuple[_Folder, IO[bytes]]:
    """Compress ``sources`` into one stream with ``folder``'s compressor (in a worker)."""
    stream = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 (closed by caller)
    try:
        packed = []
        compressor = folder.get_compressor()
        for arcname, src in sources:
            with open_source(src, True) as (reader, _):
                insize, outsize, crc = compressor.compress(reader, stream)
            packed.append((arcname, insize, outsize, crc))
        tail = compressor.flush(stream)
        if packed:  # py7zr counts the flushed bytes to the last member
            arcname, insize, outsize, crc = packed[-1]
            packed[-1] = (arcname, insize, outsize + tail, crc)
    except BaseException:
        stream.close()
        raise
    return _Folder(packed, compressor.digest, compressor.packsize, compressor.unpacksizes), stream


_CODERS = {
    packing.DEFLATE: [{"id": py7zr.FILTER_DEFLATE}],
    packing.STORE: [{"id": py7zr.FILTER_COPY}],
}
# Against LZMA2 preset 9 on near-random data: zlib level 6 ~9x as fast; a copy, ~100x.
_SPEEDUP = {packing.DEFLATE: 8, packing.STORE: 100}


@dataclass(frozen=True)
class _Folder:
    """One folder as written: its members, and its packed stream's checksum and size."""

    members: list[_Packed]
    digest: int
    packsize: int
    unpacksizes: list[int]


def _add_folder(sz: Any, header: Any, g: int, folder: Any, written: _Folder) -> None:
    """The header entries py7zr's writer makes for ``written``, the members of folder ``g``."""
    sub, pack = header.main_streams.substreamsinfo, header.main_streams.packinfo
    for arcname, insize, outsize, crc in written.members:
        info = sz._make_file_info_from_name(None, insize, arcname)
        info["maxsize"], info["digest"] = outsize, crc
        header.files_info.files.append(info)
        header.files_info.emptyfiles.append(info["emptystream"])
        sz.files.append(info)
        sub.digestsdefined.append(True)
        sub.digests.append(crc)
        sub.unpacksizes.append(insize)
        sub.num_unpackstreams_folders[g] += 1
    pack.numstreams += 1
    if pack.enable_digests:
        pack.crcs.append(written.digest)
        pack.digestdefined.append(True)
    pack.packsizes.append(written.packsize)
    folder.unpacksizes = written.unpacksizes
