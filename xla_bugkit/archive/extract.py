"""Extracting a bundle someone else made, treating every byte of it as hostile.

Every member is vetted as the archive lists it (``plan``), before anything is written; then
each file is streamed into a new file opened with O_EXCL, counted and hashed on the way
(``sinks``), because the sizes an archive declares can lie. Given the manifest's list of
files, nothing else is extracted and nothing more than it lists. On any failure ``dest`` is
emptied again, however deep what was made in it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit.archive.members import DIR, FILE, Expected, Member, normalize, shown
from xla_bugkit.archive.plan import MAX_ENTRIES, MAX_RATIO, MAX_TOTAL, Budget, Planner, parents
from xla_bugkit.archive.read import archive_size, open_archive
from xla_bugkit.archive.remove import remove_tree
from xla_bugkit.archive.sinks import CheckedSink, write_error
from xla_bugkit.errors import BadBundleError, BugkitError


def extract_safely(
    path: Path,
    dest: Path,
    *,
    expected: Mapping[str, Expected] | None = None,
    max_total: int = MAX_TOTAL,
    max_entries: int = MAX_ENTRIES,
    max_ratio: float = MAX_RATIO,
) -> list[Path]:
    """Extract the archive ``path`` into ``dest``, an empty, freshly created directory.

    Refuses, with ``BadBundleError`` naming the entry: absolute, drive-letter, backslash,
    ``..``, overlong or too deeply nested names; symlinks, hard links and special files;
    duplicate names; more than ``max_entries`` entries; more than ``max_total`` bytes, or
    more than ``max_ratio`` times the archive's own size, whether declared or actually
    decompressed. Given ``expected`` (normalized name -> what the manifest lists): any file
    not listed, any listed file missing, any size other than the listed one (up to its
    ``slack`` for an editable file), and any exact file whose sha256 differs, the moment it
    does. Nothing is written outside ``dest``, and on any failure ``dest`` is left empty.
    Returns the files written, in archive order.
    """
    root = _empty_dir(dest)
    try:
        return _unpack(path, root, expected, Limits(max_total, max_entries, max_ratio))
    except BaseException:
        _empty_out(root)  # also on Ctrl-C: a half-extracted bundle must not look whole
        raise


def check_archive(
    path: Path,
    *,
    expected: Mapping[str, Expected] | None = None,
    max_total: int = MAX_TOTAL,
    max_entries: int = MAX_ENTRIES,
    max_ratio: float = MAX_RATIO,
) -> None:
    """Every check ``extract_safely`` makes, with nothing written: each member is streamed
    through the same counts and hashes, then dropped. Raises what it would raise."""
    _unpack(path, None, expected, Limits(max_total, max_entries, max_ratio))


@dataclass(frozen=True)
class Limits:
    max_total: int
    max_entries: int
    max_ratio: float


def _unpack(
    path: Path, root: Path | None, expected: Mapping[str, Expected] | None, limits: Limits
) -> list[Path]:
    budget = Budget(
        path, archive_size(path), limits.max_total, limits.max_ratio, limits.max_entries
    )
    planner = Planner(path, budget, expected)
    with open_archive(path, max_entries=limits.max_entries, vet=planner.add) as reader:
        plan = planner.finish()
        if root is not None:
            _make_dirs(path, root, plan)
        files = [m for m in plan if m.kind == FILE]
        sinks: list[CheckedSink] = []
        written: list[Path] = []

        def open_sink(m: Member) -> CheckedSink:
            target = None if root is None else _target(root, m)
            want = None if expected is None else expected[normalize(m.name)]
            sinks.append(CheckedSink(path, m, budget, want, target))
            if target is not None:
                written.append(target)
            return sinks[-1]

        reader.stream(files, open_sink, root)
    if len(sinks) != len(files):
        raise BadBundleError(f"{path}: the archive did not give every member it lists")
    for sink in sinks:
        sink.verify()
    return written


def _empty_dir(dest: Path) -> Path:
    try:
        if not any(dest.iterdir()):
            return dest.resolve()
    except OSError:
        pass
    raise BugkitError(f"{dest} must be an existing, empty directory to extract into")


def _make_dirs(path: Path, root: Path, plan: Sequence[Member]) -> None:
    names = {normalize(m.name) for m in plan if m.kind == DIR}
    names.update(p for m in plan for p in parents(normalize(m.name)))
    for name in sorted(names):  # sorted: parents before their children
        target = _inside(root, root / name, name)
        try:
            target.mkdir(exist_ok=True)
        except OSError as e:
            raise write_error(path, name, e) from None


def _target(root: Path, m: Member) -> Path:
    name = normalize(m.name)
    return _inside(root, root / name, name)


def _inside(root: Path, target: Path, name: str) -> Path:
    # The names were checked already; this guards against anything on disk (a link the
    # checks missed) redirecting a write, by resolving what the kernel would open.
    real = Path(os.path.realpath(target.parent)) / target.name
    if real == root or root not in real.parents:
        raise BadBundleError(f"refusing entry {shown(name)}: it resolves outside {root}")
    return target


def _empty_out(root: Path) -> None:
    for child in root.iterdir():
        remove_tree(child)
