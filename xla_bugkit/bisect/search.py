"""The search over releases: which fail the recorded way, and where that changes.

Three releases are tried first: the oldest and the newest of the range, and the one the
reporter ran (when it is in the range). Between two of them that disagree (one fails, the
other passes) the boundary is bisected down to two neighbouring releases; between two that
agree, nothing is tried (a bisect assumes one change, as ``git bisect`` does, and the
result says which releases it tried). A release that could not be tried, or failed some
other way, is stepped around, as ``git bisect skip`` does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from xla_bugkit.verdict import Outcome, Verdict


class Seen(StrEnum):
    FAILS = "fails"  # the recorded failure, the same way
    PASSES = "passes"  # ran and gave a correct result
    OTHER = "fails differently"  # failed, but not the recorded way
    UNTRIED = "not tried"  # could not be had, or could not run the replay


@dataclass(frozen=True)
class Probe:
    """What one release showed."""

    version: str
    seen: Seen
    detail: str  # the replay's evidence line, or why it was not tried
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "seen": self.seen.value,
            "detail": self.detail,
            "seconds": round(self.seconds, 2),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Probe:
        return cls(str(data["version"]), Seen(data["seen"]), str(data["detail"]), data["seconds"])


@dataclass(frozen=True)
class Boundary:
    """Where the outcome changes: ``before`` shows one (fails or passes), ``after`` the other;
    ``exact`` when no release lies between them untried."""

    before: str
    after: str
    regression: bool  # passes before, fails after (else: fixed)
    exact: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "change": "regression" if self.regression else "fix",
            "exact": self.exact,
        }


@dataclass(frozen=True)
class Bisection:
    """The releases tried, oldest first, and the boundaries found between them."""

    probes: tuple[Probe, ...]
    boundaries: tuple[Boundary, ...]
    versions: tuple[str, ...]  # the range, oldest first
    reported: str | None = None  # the release the reporter ran
    untried: tuple[tuple[str, str], ...] = field(default=())  # (version, why) never tried
    dist: str = "jaxlib"  # what the versions are releases of: "jaxlib", or "libtpu" on a TPU

    def seen(self, version: str) -> Seen | None:
        return next((p.seen for p in self.probes if p.version == version), None)

    @property
    def newest(self) -> Probe | None:
        """The newest release that ran the replay, failing or passing."""
        usable = [p for p in self.probes if p.seen in (Seen.FAILS, Seen.PASSES)]
        return max(usable, key=lambda p: self.versions.index(p.version), default=None)

    @property
    def summary(self) -> str:
        """One line: the answer a reporter and a maintainer want first; and when newer
        releases than the newest that answered fail another way, that too."""
        newest = self.newest
        if newest is None:
            return "no release could run the replay"
        later = [
            p.version
            for p in self.probes
            if p.seen is Seen.OTHER
            and self.versions.index(p.version) > self.versions.index(newest.version)
        ]
        if not later:
            return self._answer(newest)
        later.sort(key=self.versions.index)
        span = (
            f"{self.dist} {later[0]}"
            if len(later) == 1
            else f"{self.dist} {later[0]} on ({len(later)} tried, up to {later[-1]})"
        )
        return f"{self._answer(newest)}; it fails another way from {span}"

    def _answer(self, newest: Probe) -> str:
        fix = next((b for b in reversed(self.boundaries) if not b.regression), None)
        regression = next((b for b in reversed(self.boundaries) if b.regression), None)
        if newest.seen is Seen.PASSES:
            if fix is not None:
                where = (
                    f"fixed in {self.dist} {fix.after}"
                    if fix.exact
                    else _range("fixed", fix, self.dist)
                )
                return f"{where} (fails on {fix.before}): upgrade"
            return f"passes on every release tried ({self._tried_range()})"
        if regression is not None:
            where = (
                f"regression between {self.dist} {regression.before} and {regression.after}"
                if regression.exact
                else _range("regression", regression, self.dist)
            )
            return f"{where}: passes on {regression.before}, still fails on {newest.version}"
        return f"fails on every release tried ({self._tried_range()})"

    def _tried_range(self) -> str:
        usable = [p.version for p in self.probes if p.seen in (Seen.FAILS, Seen.PASSES)]
        order = sorted(usable, key=self.versions.index)
        if len(order) == 1:
            return f"{self.dist} {order[0]}"
        return f"{self.dist} {order[0]} to {order[-1]}: {len(order)} tried"

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "dist": self.dist,
            "reported": self.reported,
            "range": [self.versions[0], self.versions[-1]] if self.versions else [],
            "probes": [p.to_json() for p in self.probes],
            "boundaries": [b.to_json() for b in self.boundaries],
            "untried": [{"version": v, "why": why} for v, why in self.untried],
        }


def probe_seen(verdict: Verdict) -> Seen:
    """What a release's verdict says for the bisect: one that could not start the replay
    (a jaxlib that cannot drive it, a libtpu that does not load) could not test it."""
    if verdict.reproduced:
        return Seen.FAILS
    if verdict.outcome is Outcome.NOT_REPLAYABLE:
        return Seen.UNTRIED
    return Seen.PASSES if verdict.failure is None else Seen.OTHER


def _range(what: str, b: Boundary, dist: str) -> str:
    return f"{what} somewhere after {dist} {b.before} and by {b.after} (between untried)"


def _state(seen: Seen) -> bool | None:
    """True: fails the recorded way; False: passes; None: says nothing about the boundary."""
    return {Seen.FAILS: True, Seen.PASSES: False}.get(seen)


def bisect(
    versions: Sequence[str],
    probe: Callable[[str], Probe],
    *,
    reported: str | None = None,
    untried: Sequence[tuple[str, str]] = (),
    dist: str = "jaxlib",
) -> Bisection:
    """Try ``versions`` (oldest first) with ``probe`` as the module docstring says."""
    order = list(versions)
    results: dict[str, Probe] = {}

    def state(i: int) -> bool | None:
        v = order[i]
        if v not in results:
            results[v] = probe(v)
        return _state(results[v].seen)

    def anchor(indices: Sequence[int]) -> int | None:
        """The first of ``indices`` whose release says fails or passes."""
        return next((i for i in indices if state(i) is not None), None)

    anchors: list[int] = []
    if order:
        newest = anchor(range(len(order) - 1, -1, -1))
        if newest is not None:
            anchors.append(newest)
            if reported in order and order.index(reported) < newest:
                mid = anchor(range(order.index(reported), -1, -1))
                if mid is not None:
                    anchors.append(mid)
            oldest = anchor(range(min(anchors)))
            if oldest is not None:
                anchors.append(oldest)
    anchors.sort()
    boundaries = []
    for low, high in itertools.pairwise(anchors):
        if state(low) != state(high):
            boundaries.append(_narrow(low, high, state, order))
    probes = tuple(results[v] for v in order if v in results)
    return Bisection(probes, tuple(boundaries), tuple(order), reported, tuple(untried), dist)


def _narrow(
    low: int, high: int, state: Callable[[int], bool | None], order: Sequence[str]
) -> Boundary:
    """Bisect between ``low`` and ``high`` (they disagree) down to neighbours."""
    low_state = state(low)
    while high - low > 1:
        middle = (low + high) // 2
        # Nearest to the middle first, stepping around releases that say nothing.
        candidates = sorted(range(low + 1, high), key=lambda i: (abs(i - middle), i))
        chosen = next((i for i in candidates if state(i) is not None), None)
        if chosen is None:
            break
        if state(chosen) == low_state:
            low = chosen
        else:
            high = chosen
    return Boundary(order[low], order[high], regression=not low_state, exact=high - low == 1)
