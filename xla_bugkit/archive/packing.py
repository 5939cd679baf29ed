"""What goes together in a 7z archive, and how it is packed: members in an order where
content they share sits together (a module's texts, its protos; modules that embed the same
weights), cut into groups only between families; and the large dense members that Deflate
packs within a few percent of LZMA, at a tenth of the time. ``sevenzip`` writes the folders.
"""

from __future__ import annotations

import bisect
import itertools
import lzma
import mmap
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from xla_bugkit import filememo

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
    # How many units of each kind there are: one alone of its kind shares content with none.
    per_kind = Counter(k for k, _ in {(kind(n), _unit(n)) for n, _ in sources if _unit(n)})
    for name, path in sources:
        module = _unit(name)
        if not module:
            continue
        k = kind(name)
        me = parent.setdefault((k, module), (k, module))
        if per_kind[k] < 2:
            continue
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


def _window_hashes(
    data: bytes | mmap.mmap, anchors: re.Pattern[bytes] | None = None
) -> Iterator[int]:
    """The hash of each window of ``_WINDOW`` varied bytes after an ``_ANCHOR`` byte; with
    ``anchors``, only after those it matches (``_KEPT``), found by the regex engine."""
    for found in (anchors or _ANCHORS).finditer(data):
        window = data[found.start() + 1 : found.start() + 1 + _WINDOW]
        if len(window) == _WINDOW and len(set(window)) >= _VARIED:
            yield hash(window)


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


DENSE = 3  # the kind of a member written with Deflate or stored (``Family``)
DENSE_FROM = 1 << 20  # smaller members save too little time to be worth the test
DEFLATE, STORE = "deflate", "store"  # how a dense member goes (``dense``)

# Deflate is chosen for a member when, on samples of it, zlib packs to more than _DENSE_RATIO
# of the input (dense data: not text, not zeros) and LZMA's output is less than _GAIN smaller
# (float32 weights: 0.88 of the input against Deflate's 0.91, at ten times the time), and
# when fewer than _REPEATED of its varied byte windows recur in it or in the rest of its
# family: a repeat further back than Deflate's 32 KiB window is what LZMA's dictionary finds.
_SAMPLES, _SAMPLE = 4, 1 << 16
_DENSE_RATIO, _GAIN, _REPEATED = 0.5, 0.05, 0.02
_KEEP_ONE_IN = 8  # windows whose first byte is 0 modulo this are compared: bounded memory
# A member is stored, where the archive has room for it so, when Deflate would pack it to
# more than _STORE_RATIO: float32 weights go to 0.91 at ~35 MB/s, half a second for the
# 17 MB of a training step's arguments, to save 9% of them. Many small samples: a file of
# weights often ends in a small array of ones, which four large samples would weigh as a
# quarter of it (0.68 estimated, 0.91 packed, on a 17 MB snapshot; 0.91 from these).
_STORE_SAMPLES, _STORE_SAMPLE, _STORE_RATIO = 64, 1 << 12, 0.85


def dense(
    sources: Sequence[tuple[str, Path]],
    sizes: Sequence[int],
    families: Sequence[Family],
    pool: ThreadPoolExecutor,
    *,
    store: bool = False,
) -> dict[int, str]:
    """The large protos and arrays of a family of one module (a family of several shares
    content, which only LZMA finds) that go as ``DEFLATE`` or, where ``store`` (the archive
    has room for them uncompressed), as ``STORE``: ``how_to_pack``."""
    members: dict[Family, list[int]] = {}
    for i, family in enumerate(families):
        members.setdefault(family, []).append(i)

    def alone(i: int) -> bool:
        return len({_unit(sources[j][0]) for j in members[families[i]]}) == 1

    candidates = [
        i for i, size in enumerate(sizes) if size >= DENSE_FROM and families[i][0] == 1 and alone(i)
    ]

    def check(i: int) -> str | None:
        others = [sources[j][1] for j in members[families[i]] if j != i]
        return how_to_pack(sources[i][1], others, store=store)

    methods = zip(candidates, pool.map(check, candidates), strict=True)
    return {i: method for i, method in methods if method is not None}


def how_to_pack(path: Path, alongside: Sequence[Path] = (), *, store: bool = False) -> str | None:
    """``STORE`` (only where ``store``) for bytes Deflate would pack little (``not_worth_packing``),
    ``DEFLATE`` where it ``deflate_suffices``, None for LZMA2; bytes that repeat in the file or
    in the files ``alongside`` it in a stream stay with LZMA, which finds the repeats."""
    try:
        if store and not_worth_packing(path):
            # Repeating bytes are LZMA's, and Deflate would be judged on them again.
            return None if _repeats(path, alongside) else STORE
    except OSError:  # the writer reports it, where it reads the file for the archive
        return None
    return DEFLATE if deflate_suffices(path, alongside) else None


def weigh_ahead(path: Path) -> None:
    """Read, before it is needed, what ``how_to_pack`` reads of a large file that nothing
    writes again (a snapshot): whether Deflate would pack it little, and its windows' hashes;
    ``how_to_pack`` then finds them (``filememo``)."""
    _DENSE.put(path, not_worth_packing(path))
    _HASHES.put(path, tuple(_kept_hashes(path)))


# What ``weigh_ahead`` read, by file: ``not_worth_packing``, and ``_kept_hashes``.
_DENSE: filememo.Memo[bool] = filememo.Memo()
_HASHES: filememo.Memo[tuple[int, ...]] = filememo.Memo()


def not_worth_packing(path: Path) -> bool:
    """Whether Deflate would pack the file at ``path`` to more than ``_STORE_RATIO`` of it,
    by samples: time spent for little (near-random bytes, float weights)."""
    if (known := _DENSE.get(path)) is not None:
        return known
    try:
        samples = _samples(path, _STORE_SAMPLES, _STORE_SAMPLE)
    except OSError:  # the writer reports it, where it reads the file for the archive
        return False
    raw = sum(map(len, samples))
    return bool(raw) and sum(len(zlib.compress(s, 6)) for s in samples) > _STORE_RATIO * raw


def deflate_suffices(path: Path, alongside: Sequence[Path] = ()) -> bool:
    """Whether Deflate packs the file at ``path`` within a few percent of what LZMA2 at
    preset 9 would, at a tenth of its time: bytes LZMA packs little better (near-random ones,
    float weights) that repeat neither in it nor in the files ``alongside`` it in a stream."""
    try:
        samples = _samples(path, _SAMPLES, _SAMPLE)
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


def _samples(path: Path, count: int, size: int) -> list[bytes]:
    """``count`` pieces of ``size`` bytes, evenly spaced over the file."""
    with path.open("rb") as f:
        span = max(os.fstat(f.fileno()).st_size - size, 0)
        samples = []
        for start in sorted({round(k * span / (count - 1)) for k in range(count)}):
            f.seek(start)
            if piece := f.read(size):
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
    """The hashes of the windows ``_window_hashes`` takes from the file at ``path`` (mapped,
    not read), one in ``_KEEP_ONE_IN``: those whose first byte is 0 modulo it, the same
    windows in every file."""
    if (known := _HASHES.get(path)) is not None:
        yield from known
        return
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield from _window_hashes(data, _KEPT)


_ANCHORS = re.compile(re.escape(_ANCHOR))
_KEPT = re.compile(
    re.escape(_ANCHOR)
    + b"["
    + b"".join(re.escape(bytes([v])) for v in range(0, 256, _KEEP_ONE_IN))
    + b"]"
)
