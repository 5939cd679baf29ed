"""The parts of a job that ran on several machines, opened: which place each has in the job,
how strongly its ending points at XLA, and the one the job's failure is judged by.

Every part is opened as ``verify`` opens a stranger's bundle (its manifest validated, its
files held to their sizes and hashes into a temporary folder that is removed afterwards).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xla_bugkit.archive.naming import suffix_format
from xla_bugkit.bundle.manifest import Manifest, open_bundle
from xla_bugkit.bundle.manifest.integrity import OpenBundle
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure import peers
from xla_bugkit.failure.kinds import KINDS, Kind

_KNOWN = frozenset(kind.value for kind in Kind)
_MOST_PARTS = 1 << 20  # a job of a million processes is larger than any real one
_OUTSIDE_SIGNALS = frozenset({"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP"})
_OF_SIZE = re.compile(r"\.part-\d+-of-(\d+)(?=\.)")  # bundle.part-1-of-4.zip


@dataclass(frozen=True)
class Part:
    """One part's bundle, opened and checked."""

    index: int
    bundle: OpenBundle

    @property
    def manifest(self) -> Manifest:
        return self.bundle.manifest

    @property
    def job(self) -> dict[str, Any]:
        """The part's ``job`` record (empty in a bundle collected outside a job)."""
        return dict(self.manifest.get("job") or {})

    @property
    def process(self) -> dict[str, Any]:
        """The failing process's record (empty without the start-up hook's records)."""
        return dict(self.manifest.get("process") or {})

    @property
    def failure(self) -> dict[str, Any]:
        return self.manifest["failure"]

    @property
    def ended(self) -> str:
        """When its program ended (UTC); bundles without the record: when it was written."""
        return str(self.job.get("ended") or self.manifest["created"])

    @property
    def ended_by_job(self) -> str | None:
        """How the job took this process down after another failed, in words; None when
        it did not. A bundle collected before its words were known to be the job's (a gloo
        all-reduce that lost its peer, the JAX client's abort at shutdown) says so in its
        headline."""
        f = self.failure
        if f.get("peer"):
            return str(f["peer"])
        if f.get("kind") == "success":
            return None
        return peers.job_error(str(f.get("headline") or ""))

    @property
    def taken_down(self) -> bool:
        """The job took this process down after another failed, or it was stopped from
        outside (a launcher ends the others once one has failed)."""
        f = self.failure
        if self.ended_by_job is not None:
            return True
        return (
            f.get("kind") == "process crash"
            and not f.get("site")
            and (f.get("signal") in _OUTSIDE_SIGNALS or bool(f.get("stopped_by")))
        )

    @property
    def reproduced(self) -> bool:
        return any(
            str((m.get("replay") or {}).get("outcome", "")).startswith("reproduced")
            for m in self.manifest["modules"]
        )

    def rank(self) -> tuple[int, bool, int]:
        """Where the part stands as evidence of the job's failure, first first: a part that
        failed on its own, then one the job took down, then one with no failure; among the
        first, proof (a replay that reproduced it) before words, then ``weight``."""
        group = 1 if self.taken_down else 2 if self.weight() == 0 else 0
        return (group, not self.reproduced, -self.weight())

    def weight(self) -> int:
        """How strongly the part's ending points at XLA (``KindInfo.weight``), among the parts
        that failed on their own. A part the job took down (a peer's heartbeat, a collective
        that lost its peer) ranks below all of them, a part with no failure last."""
        kind = str(self.failure.get("kind", ""))
        if self.taken_down:
            return 1
        if kind not in _KNOWN:  # a kind of a newer version: as the program's own failure
            return KINDS[Kind.EXIT].weight
        if kind == Kind.EXIT and self.reproduced:  # a wrong value a replay proved
            return KINDS[Kind.WRONG_RESULT].weight
        return KINDS[Kind(kind)].weight


def part_paths(given: Sequence[Path]) -> list[Path]:
    """The part bundles named, a folder standing for the ``*.part-*`` bundles in it."""
    found: list[Path] = []
    for path in given:
        if path.is_dir():
            inside = sorted(
                p
                for p in path.iterdir()
                if ".part-" in p.name and suffix_format(p) is not None and p.is_file()
            )
            if not inside:
                raise BugkitError(
                    f"{path} holds no part bundles (names like bundle.part-0-of-4.zip)"
                )
            found += inside
        elif not path.is_file():
            raise BugkitError(f"{path}: no such file")
        else:
            found.append(path)
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise BugkitError("merge takes the bundles of the parts of one job")
    return unique


@contextlib.contextmanager
def opened(paths: Sequence[Path]) -> Iterator[list[Part]]:
    """Every part opened and checked, each given its place in the job."""
    with contextlib.ExitStack() as stack:
        bundles = [stack.enter_context(open_bundle(p, prefix="xla-bugkit-merge-")) for p in paths]
        yield _placed(bundles)


def _placed(bundles: Sequence[OpenBundle]) -> list[Part]:
    """Parts by the place each says it has (``job.part``, else the process's rank); a place
    two parts claim, or parts of jobs of different sizes, are refused."""
    places: list[int] = []
    sizes: set[int] = set()
    for b in bundles:
        job = b.manifest.get("job")
        rank = _process(b.manifest).get("rank")
        place = job["part"] if job is not None else rank if isinstance(rank, int) else None
        if place is None:
            raise BugkitError(
                f"{b.path.name} does not say which part of a job it is (collect it with "
                "--job-part I/N, or under a launcher: srun, mpirun)"
            )
        size = job_size(b)
        if place < 0 or (size is not None and place >= size) or place > _MOST_PARTS:
            of = f" of {size}" if size is not None else ""
            raise BugkitError(f"{b.path.name} says it is part {place}{of}: no such part")
        places.append(place)
        sizes |= {size} if size is not None else set()
    for i, place in enumerate(places):
        if places.index(place) != i:
            first = bundles[places.index(place)].path.name
            raise BugkitError(f"{first} and {bundles[i].path.name} are both part {place}")
    if len(sizes) > 1:
        raise BugkitError(f"the parts come from jobs of different sizes ({sorted(sizes)})")
    return sorted(
        (Part(place, b) for place, b in zip(places, bundles, strict=True)), key=lambda p: p.index
    )


def job_size(bundle: OpenBundle) -> int | None:
    """How many processes the part's job has: its job record, else its name
    (``bundle.part-1-of-4.zip``), else what its process saw (which, read before the job
    started, may be 1)."""
    job = bundle.manifest.get("job")
    if job is not None and job["parts"] is not None:
        return job["parts"]
    named = _OF_SIZE.search(bundle.path.name)
    if named is not None:
        return int(named.group(1))
    count = _process(bundle.manifest).get("processes")
    return int(count) if isinstance(count, int) else None


def _process(manifest: Manifest) -> dict[str, Any]:
    return dict(manifest.get("process") or {})


def choose(parts: Sequence[Part]) -> Part:
    """The part the job's failure is judged by: the strongest evidence of XLA's doing
    (``Part.rank``), and among equals the one that stopped first."""
    return min(parts, key=lambda p: (*p.rank(), p.ended, p.index))
