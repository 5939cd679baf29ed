"""Extracting a bundle someone else made, treating every byte of it as hostile.

Names, kinds and sizes are checked before anything is written; then each file is streamed
into a new file opened with O_EXCL, counting the real bytes against the caps, because the
sizes an archive declares can lie. On any failure ``dest`` is emptied again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from xla_bugkit.archive.members import DIR, FILE, Member, name_problem, normalize
from xla_bugkit.archive.read import open_archive
from xla_bugkit.errors import DISK_FULL_ERRNOS, BadBundleError, BugkitError, DiskFullError


def extract_safely(
    path: Path,
    dest: Path,
    *,
    max_total: int = 4 << 30,
    max_entries: int = 10_000,
    max_ratio: float = 10_000.0,
) -> list[Path]:
    """Extract the archive ``path`` into ``dest``, an empty, freshly created directory.

    Refuses, with ``BadBundleError`` naming the entry: absolute, drive-letter, backslash or
    ``..`` names; symlinks, hard links and special files; duplicate names; more than
    ``max_entries`` entries; more than ``max_total`` bytes, or more than ``max_ratio`` times
    the archive's own size, whether declared or actually decompressed. Nothing is written
    outside ``dest``, and on any failure ``dest`` is left empty. Returns the files written,
    in archive order.
    """
    root = _empty_dir(dest)
    try:
        with open_archive(path, max_entries=max_entries) as reader:
            plan = _plan(path, reader.members, max_entries)
            budget = _Budget(path, max_total, max_ratio, path.stat().st_size)
            budget.check_declared(sum(m.size for m in plan))
            _make_dirs(path, root, plan)
            written: list[Path] = []
            files = [m for m in plan if m.kind == FILE]

            def open_sink(m: Member) -> _FileSink:
                written.append(_target(path, root, m))
                return _FileSink(path, written[-1], m, budget)

            reader.stream(files, open_sink, root)
            return written
    except BaseException:
        _empty_out(root)  # also on Ctrl-C: a half-extracted bundle must not look whole
        raise


def _empty_dir(dest: Path) -> Path:
    try:
        if not any(dest.iterdir()):
            return dest.resolve()
    except OSError:
        pass
    raise BugkitError(f"{dest} must be an existing, empty directory to extract into")


def _plan(path: Path, members: Sequence[Member], max_entries: int) -> list[Member]:
    """The members to create, after refusing anything unsafe or ambiguous."""
    if len(members) > max_entries:
        raise BadBundleError(f"{path} has more than {max_entries} entries; refusing it")
    plan: list[Member] = []
    files: set[str] = set()
    dirs: set[str] = set()
    for m in members:
        if m.kind == DIR and not normalize(m.name):
            continue  # "./": the destination itself
        _refuse_bad_entry(path, m)
        name = normalize(m.name)
        if m.kind == FILE:
            if name in files:
                raise BadBundleError(f"{path}: refusing duplicate entry {m.name!r}")
            files.add(name)
        else:
            dirs.add(name)
        dirs.update(_parents(name))
        plan.append(m)
    clash = sorted(files & dirs)
    if clash:
        raise BadBundleError(f"{path}: refusing entry {clash[0]!r}: both a file and a directory")
    return plan


def _refuse_bad_entry(path: Path, m: Member) -> None:
    problem = name_problem(m.name)
    if problem is not None:
        raise BadBundleError(f"{path}: refusing entry {m.name!r}: {problem}")
    if m.kind not in (FILE, DIR):
        raise BadBundleError(f"{path}: refusing {m.kind} entry {m.name!r}")
    if m.size < 0:
        raise BadBundleError(f"{path}: refusing entry {m.name!r}: negative size")


def _parents(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _make_dirs(path: Path, root: Path, plan: Sequence[Member]) -> None:
    names = {normalize(m.name) for m in plan if m.kind == DIR}
    names.update(p for m in plan for p in _parents(normalize(m.name)))
    for name in sorted(names):  # sorted: parents before their children
        target = _inside(path, root, root / name, name)
        try:
            target.mkdir(exist_ok=True)
        except OSError as e:
            raise _write_error(path, name, e) from None


def _target(path: Path, root: Path, m: Member) -> Path:
    name = normalize(m.name)
    return _inside(path, root, root / name, name)


def _inside(path: Path, root: Path, target: Path, name: str) -> Path:
    # The names were checked already; this guards against anything on disk (a link the
    # checks missed) redirecting a write, by resolving what the kernel would open.
    real = Path(os.path.realpath(target.parent)) / target.name
    if real == root or root not in real.parents:
        raise BadBundleError(f"refusing entry {name!r}: it resolves outside {root}")
    return target


def _write_error(path: Path, name: str, e: OSError) -> BugkitError:
    if e.errno in DISK_FULL_ERRNOS:
        return DiskFullError(f"no space left to extract {path} ({name!r}): {e.strerror}")
    if isinstance(e, FileExistsError):
        return BadBundleError(f"{path}: refusing entry {name!r}: it collides with another entry")
    return BadBundleError(f"{path}: cannot extract {name!r}: {e.strerror}")


class _Budget:
    """Total bytes allowed out of the archive: the lower of the absolute and ratio caps."""

    def __init__(self, path: Path, max_total: int, max_ratio: float, archive_size: int) -> None:
        by_ratio = int(max_ratio * max(archive_size, 1))
        self._path = path
        self._limit = min(max_total, by_ratio)
        self._why = f"{max_total} bytes" if max_total <= by_ratio else f"{max_ratio:g}x its size"
        self._used = 0

    def check_declared(self, total: int) -> None:
        if total > self._limit:
            raise BadBundleError(
                f"{self._path} declares {total} bytes uncompressed, over the limit of "
                f"{self._why}; refusing a possible decompression bomb"
            )

    def take(self, n: int, name: str) -> None:
        self._used += n
        if self._used > self._limit:
            raise BadBundleError(
                f"{self._path}: {name!r} decompresses past the limit of {self._why}; "
                "refusing a possible decompression bomb"
            )


class _FileSink:
    """A new file under the destination that refuses more bytes than were declared."""

    def __init__(self, path: Path, target: Path, member: Member, budget: _Budget) -> None:
        self._path, self._member, self._budget = path, member, budget
        self._written = 0
        try:
            self._file: BinaryIO = target.open("xb")  # O_EXCL: never reuse an existing file
        except OSError as e:
            raise _write_error(path, member.name, e) from None

    def write(self, data: bytes) -> None:
        self._written += len(data)
        if self._written > self._member.size:
            raise BadBundleError(
                f"{self._path}: {self._member.name!r} holds more data than its header declares"
            )
        self._budget.take(len(data), self._member.name)
        try:
            self._file.write(data)
        except OSError as e:
            raise _write_error(self._path, self._member.name, e) from None

    def close(self) -> None:
        if not self._file.closed:
            try:
                self._file.close()
            except OSError as e:
                raise _write_error(self._path, self._member.name, e) from None


def _empty_out(root: Path) -> None:
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
