"""What an extraction will create, decided from the archive's listing before any data is read.

Each member is vetted as the archive lists it (``Planner.add`` is a ``Vet``): its name, kind
and declared size, duplicates, the entry count, the declared total, and, given the list the
caller trusts (``Expected`` by name), that the member is listed there with that size. A tar
member refused here is refused before its data is decompressed; a 7z or zip one, before a
byte of it is. ``finish`` then checks what needs the whole listing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from xla_bugkit.archive.members import (
    DIR,
    FILE,
    Expected,
    Member,
    name_problem,
    normalize,
    shown,
)
from xla_bugkit.errors import BadBundleError

# The caps ``Budget`` takes unless told otherwise.
MAX_TOTAL = 4 << 30
MAX_RATIO = 10_000.0
MAX_ENTRIES = 10_000


class Budget:
    """What the archive may hold: at most ``max_entries`` entries, and in all the lower of the
    absolute and ratio caps in bytes, whether declared or actually decompressed. A folder
    (``archive_size`` None) decompresses nothing: only the absolute cap holds."""

    def __init__(
        self,
        path: Path,
        archive_size: int | None,
        max_total: int = MAX_TOTAL,
        max_ratio: float = MAX_RATIO,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        by_ratio = max_total if archive_size is None else int(max_ratio * max(archive_size, 1))
        self._path, self.max_entries = path, max_entries
        self._limit = min(max_total, by_ratio)
        self._why = f"{max_total} bytes" if max_total <= by_ratio else f"{max_ratio:g}x its size"
        self._entries = 0
        self._declared = 0
        self._used = 0

    def declare(self, m: Member) -> None:
        """Count ``m`` as listed (a ``Vet``): listing a tar.gz decompresses all of it, and
        every listing is held in memory, so past the caps listing stops too."""
        self._entries += 1
        if self._entries > self.max_entries:
            raise BadBundleError(
                f"{self._path} has more than {self.max_entries} entries; refusing it"
            )
        self._declared += max(m.size, 0)
        if self._declared > self._limit:
            raise BadBundleError(
                f"{self._path} declares at least {self._declared} bytes uncompressed, over the "
                f"limit of {self._why}; refusing a possible decompression bomb"
            )

    def take(self, n: int, name: str) -> None:
        self._used += n
        if self._used > self._limit:
            raise BadBundleError(
                f"{self._path}: {name!r} decompresses past the limit of {self._why}; "
                "refusing a possible decompression bomb"
            )


class Planner:
    """The members to create, each refused as soon as it is listed if unsafe or unexpected."""

    def __init__(self, path: Path, budget: Budget, expected: Mapping[str, Expected] | None) -> None:
        self._path, self._budget, self._expected = path, budget, expected
        self._plan: list[Member] = []
        self._files: set[str] = set()
        self._dirs: set[str] = set()  # directory entries, and every file's parents
        self._dir_entries: set[str] = set()

    def add(self, m: Member) -> None:
        """Vet ``m``, the next member the archive lists."""
        self._budget.declare(m)
        if m.kind == DIR and not normalize(m.name):
            return  # "./": the destination itself
        _refuse_bad_entry(self._path, m)
        name = normalize(m.name)
        if m.kind == FILE:
            if name in self._files:
                raise BadBundleError(f"{self._path}: refusing duplicate entry {shown(m.name)}")
            self._check_expected(name, m)
            self._files.add(name)
        else:
            self._dir_entries.add(name)
            self._dirs.add(name)
        self._dirs.update(parents(name))
        self._plan.append(m)

    def _check_expected(self, name: str, m: Member) -> None:
        if self._expected is None:
            return
        e = self._expected.get(name)
        if e is None:
            raise BadBundleError(
                f"{self._path} holds files its manifest does not list: {shown(name)}"
            )
        if not e.slack and m.size != e.size:
            raise mismatch(name)  # the moment its header says so, before a byte is read
        if m.size > e.size + e.slack:
            raise BadBundleError(
                f"{self._path}: refusing entry {shown(m.name)}: it holds {m.size} bytes, where "
                f"its manifest lists {e.size} and {e.slack} more for edits"
            )

    def finish(self) -> list[Member]:
        """The members to create, in archive order, once the whole listing has passed."""
        if clash := sorted(self._files & self._dirs):
            raise BadBundleError(
                f"{self._path}: refusing entry {clash[0]!r}: both a file and a directory"
            )
        if self._expected is not None:
            if missing := sorted(set(self._expected) - self._files):
                raise BadBundleError(f"{self._path} lacks files its manifest lists: {missing[:3]}")
            needed = {p for name in self._expected for p in parents(name)}
            if stray := sorted(self._dir_entries - needed):
                raise BadBundleError(
                    f"{self._path} holds a directory no file of its manifest is in: {stray[0]!r}"
                )
        return self._plan


def mismatch(name: str) -> BadBundleError:
    """The refusal of a member that is not what the manifest lists: in size or in content,
    the sha256 tells it, and so the message does."""
    return BadBundleError(f"{name} does not match its sha256 in the manifest")


def _refuse_bad_entry(path: Path, m: Member) -> None:
    problem = name_problem(m.name)
    if problem is not None:
        raise BadBundleError(f"{path}: refusing entry {shown(m.name)}: {problem}")
    if m.kind not in (FILE, DIR):
        raise BadBundleError(f"{path}: refusing {m.kind} entry {shown(m.name)}")
    if m.size < 0:
        raise BadBundleError(f"{path}: refusing entry {shown(m.name)}: negative size")


def parents(name: str) -> list[str]:
    """The directories ``name`` (normalized) lies in, outermost first."""
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
