"""Writing 7z archives with their streams compressed side by side, one per core.

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

A large member that LZMA cannot pack much better than Deflate (the random-looking floats of
a snapshot's weights, which repeat nowhere else) goes last, in a Deflate folder, which every
7z reader has: liblzma works through such data at ~3 MB/s to save ~0.5% more than Deflate
at ~30 MB/s. On a typical bundle (two snapshots of 4.2 and 2.1 MB) that took the archive
from 1.96 s to 0.60 s for 0.4% more bytes.

This uses py7zr's header classes beyond its public API (checked on 1.x): ``supported()``
says whether the installed py7zr has them, and the caller falls back to one stream.
"""

from __future__ import annotations

import bisect
import itertools
import lzma
import mmap
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

import py7zr

from xla_bugkit.proc import usable_cores

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
    return max(1, min(usable_cores(), total // (PARALLEL_FROM // 2)))


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
    ``modules/`` is its own, but for a proto or array, which joins the modules it repeats
    (the shrunk module's arrays may repeat a snapshot's arguments). What compresses together sits
    together, and ``groups`` cuts only between families."""
    group = _module_groups(sources)
    families = [(kind(name), group.get((kind(name), _unit(name)), name)) for name, _ in sources]
    order = sorted(range(len(sources)), key=lambda i: (families[i], sources[i][0]))
    return [sources[i] for i in order], [families[i] for i in order]


def _module(arcname: str) -> str:
    parts = arcname.split("/")
    return "/".join(parts[:2]) if parts[0] == "modules" and len(parts) > 2 else ""


def _unit(arcname: str) -> str:
    """What shares content as one: a module's folder; a proto or array outside ``modules/``
    (an ``inputs.npz`` may hold the arguments of a bundled snapshot again) is a unit alone."""
    return _module(arcname) or (arcname if kind(arcname) == 1 else "")


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
    units = {(kind(name), _unit(name)) for name, _ in sources if _unit(name)}
    for name, path in sources:
        module = _unit(name)
        if not module:
            continue
        k = kind(name)
        me = parent.setdefault((k, module), (k, module))
        if sum(1 for kk, _ in units if kk == k) < 2:
            continue  # a unit alone of its kind: nothing to share content with
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
    return set(_window_hashes(data))


def _window_hashes(data: bytes | mmap.mmap) -> Iterator[int]:
    """The hash of each window of ``_WINDOW`` varied bytes after an ``_ANCHOR`` byte."""
    at = data.find(_ANCHOR)
    while at >= 0:
        window = data[at + 1 : at + 1 + _WINDOW]
        if len(window) == _WINDOW and len(set(window)) >= _VARIED:
            yield hash(window)
        at = data.find(_ANCHOR, at + 1)


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
    """Write ``sources`` (arcname, path; ``sizes`` their sizes) to ``f`` as a 7z archive of
    folders compressed up to ``n`` at once; ``filters(group_bytes)`` gives an LZMA2 folder's
    filters. Members Deflate packs as well (``_dense``) go last, in Deflate folders."""
    with ThreadPoolExecutor(n, thread_name_prefix="xla-bugkit-7z") as pool:
        dense = _dense(sources, sizes, families, pool)
        order = sorted(range(len(sources)), key=lambda i: i in dense)  # stable
        segments = _segments(
            [sizes[i] for i in order], n, [families[i] for i in order], [i in dense for i in order]
        )
        # The largest folder's filters, as py7zr sizes them (with a smaller dictionary here,
        # glibc placed the encoders so that the peak RSS grew 16 MB on the benchmark's tree).
        largest = max((seg.size for seg in segments), default=0)
        sz = py7zr.SevenZipFile(f, "w", filters=filters(largest))
        header: Any = sz.header
        folders = []
        for seg in segments:
            header._initialized = False  # initialize() then appends a new folder
            folder = header.initialize()
            folder.prepare_coderinfo(DEFLATE if seg.deflate else filters(seg.size))
            folders.append(folder)
        # The costliest first: the pool is then never left with one long stream at the end.
        jobs = {
            g: pool.submit(
                _compress, folders[g], [sources[order[i]] for i in seg.members], open_source
            )
            for g, seg in sorted(enumerate(segments), key=lambda gs: -gs[1].cost)
        }
        done = [jobs[g].result() for g in range(len(segments))]  # all, or the first error
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


@dataclass(frozen=True)
class _Segment:
    """The members (indices, in archive order) of one folder, and how it is compressed."""

    members: range
    deflate: bool
    size: int
    cost: int  # bytes, Deflate's counted at 1/_DEFLATE_SPEEDUP


def _segments(
    sizes: Sequence[int], n: int, families: Sequence[Family], deflate: Sequence[bool]
) -> list[_Segment]:
    """The folders: ``groups`` of about equal cost, each split where Deflate starts; a
    member to deflate is a family of its own."""
    costs = [s // _DEFLATE_SPEEDUP if d else s for s, d in zip(sizes, deflate, strict=True)]
    pairs = enumerate(zip(families, deflate, strict=True))
    own = [(_DENSE, str(i)) if d else family for i, (family, d) in pairs]
    segments = []
    for run in groups(costs, n, own):
        for d, members in itertools.groupby(run, key=lambda i: deflate[i]):
            seg = list(members)
            size, cost = sum(sizes[i] for i in seg), sum(costs[i] for i in seg)
            segments.append(_Segment(range(seg[0], seg[-1] + 1), d, size, cost))
    return segments


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


DEFLATE = [{"id": py7zr.FILTER_DEFLATE}]
_DENSE = 3  # the kind of a member written with Deflate (``Family``)
_DENSE_FROM = 1 << 20  # smaller members save too little time to be worth the test
_DEFLATE_SPEEDUP = 8  # zlib level 6 against LZMA2 preset 9 on near-random data: ~9x
# Deflate is chosen for a member when, on samples of it, zlib packs to more than _DENSE_RATIO
# of the input (dense data: not text, not zeros) and LZMA's output is less than _GAIN smaller
# (float32 weights: 0.88 of the input against Deflate's 0.91, at ten times the time), and
# when fewer than _REPEATED of its varied byte windows recur in it or in the rest of its
# family: a repeat further back than Deflate's 32 KiB window is what LZMA's dictionary finds.
_SAMPLES, _SAMPLE = 4, 1 << 16
_DENSE_RATIO, _GAIN, _REPEATED = 0.5, 0.05, 0.02
_KEEP_ONE_IN = 8  # windows whose hash is 0 modulo this are compared: bounded memory


def _dense(
    sources: Sequence[tuple[str, Path]],
    sizes: Sequence[int],
    families: Sequence[Family],
    pool: ThreadPoolExecutor,
) -> set[int]:
    """The members to write with Deflate: large protos and arrays of a family of one module
    (a family of several shares content, which only LZMA finds), that ``deflate_suffices``."""
    members: dict[Family, list[int]] = {}
    for i, family in enumerate(families):
        members.setdefault(family, []).append(i)

    def alone(i: int) -> bool:
        return len({_unit(sources[j][0]) for j in members[families[i]]}) == 1

    candidates = [
        i
        for i, size in enumerate(sizes)
        if size >= _DENSE_FROM and families[i][0] == 1 and alone(i)
    ]

    def check(i: int) -> bool:
        others = [sources[j][1] for j in members[families[i]] if j != i]
        return deflate_suffices(sources[i][1], others)

    return {i for i, ok in zip(candidates, pool.map(check, candidates), strict=True) if ok}


def deflate_suffices(path: Path, alongside: Sequence[Path] = ()) -> bool:
    """Whether Deflate packs the file at ``path`` within a few percent of what LZMA2 at
    preset 9 would, at a tenth of its time: bytes LZMA packs little better (near-random ones,
    float weights) that repeat neither in it nor in the files ``alongside`` it in a stream."""
    try:
        samples = _samples(path)
        raw = sum(map(len, samples))
        deflated = sum(len(zlib.compress(s, 6)) for s in samples)
        if not raw or deflated < _DENSE_RATIO * raw:
            return False
        sample_lzma = [{"id": lzma.FILTER_LZMA2, "preset": 9, "dict_size": _SAMPLE}]
        packed = sum(
            len(lzma.compress(s, format=lzma.FORMAT_RAW, filters=sample_lzma)) for s in samples
        )
        return packed > (1 - _GAIN) * deflated and not _repeats(path, alongside)
    except OSError:  # the writer reports it, where it reads the file for the archive
        return False


def _samples(path: Path) -> list[bytes]:
    """``_SAMPLES`` pieces of ``_SAMPLE`` bytes, evenly spaced over the file."""
    with path.open("rb") as f:
        span = max(os.fstat(f.fileno()).st_size - _SAMPLE, 0)
        samples = []
        for start in sorted({round(k * span / (_SAMPLES - 1)) for k in range(_SAMPLES)}):
            f.seek(start)
            if piece := f.read(_SAMPLE):
                samples.append(piece)
    return samples


def _repeats(path: Path, alongside: Sequence[Path]) -> bool:
    """Whether more than ``_REPEATED`` of the windows of ``path`` (``_window_hashes``, one in
    ``_KEEP_ONE_IN``) recur in it or in the files ``alongside``."""
    seen: set[int] = set()
    for other in alongside:
        seen.update(_kept_hashes(other))
    windows = repeated = 0
    for h in _kept_hashes(path):
        windows += 1
        repeated += h in seen
        seen.add(h)
    return repeated > _REPEATED * windows


def _kept_hashes(path: Path) -> Iterator[int]:
    """``_window_hashes`` of the file at ``path`` (mapped, not read), one in
    ``_KEEP_ONE_IN``: those whose hash is 0 modulo it, the same windows in every file."""
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield from (h for h in _window_hashes(data) if h % _KEEP_ONE_IN == 0)


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
