"""The search over releases: which it tries, and what it concludes, for each shape of history."""

from __future__ import annotations

import math

import pytest

from xla_bugkit.bisect.search import Probe, Seen, bisect

VERSIONS = [f"0.{minor}.{patch}" for minor in range(6, 11) for patch in range(3)]  # 15 releases
F, P, OTHER, U = Seen.FAILS, Seen.PASSES, Seen.OTHER, Seen.UNTRIED


def history(changes: dict[str, Seen], default: Seen) -> dict[str, Seen]:
    """Each release's outcome: ``default`` until the first release named, then as named."""
    seen, now = {}, default
    for v in VERSIONS:
        now = changes.get(v, now)
        seen[v] = now
    return seen


def run(truth: dict[str, Seen], reported: str | None = None):  # type: ignore[no-untyped-def]
    tried: list[str] = []

    def probe(v: str) -> Probe:
        tried.append(v)
        return Probe(v, truth[v], f"replay under {v}")

    return bisect(VERSIONS, probe, reported=reported), tried


def test_a_regression_is_narrowed_to_two_neighbouring_releases() -> None:
    result, tried = run(history({"0.8.2": F}, P))
    [boundary] = result.boundaries
    assert (boundary.before, boundary.after, boundary.regression) == ("0.8.1", "0.8.2", True)
    assert boundary.exact
    assert result.summary == (
        "regression between jaxlib 0.8.1 and 0.8.2: passes on 0.8.1, still fails on 0.10.2"
    )
    # A bisect, not a sweep: the ends, then about log2 of the range.
    assert len(tried) <= 2 + math.ceil(math.log2(len(VERSIONS)))
    assert len(set(tried)) == len(tried)  # no release is replayed twice


def test_a_fix_says_which_release_to_upgrade_to() -> None:
    result, _ = run(history({"0.9.1": P}, F), reported="0.7.0")
    [boundary] = result.boundaries
    assert not boundary.regression
    assert result.summary == "fixed in jaxlib 0.9.1 (fails on 0.9.0): upgrade"


def test_failing_everywhere_is_said_with_what_was_tried() -> None:
    result, tried = run(history({}, F))
    assert result.boundaries == ()
    assert sorted(tried) == ["0.10.2", "0.6.0"]
    assert result.summary == "fails on every release tried (jaxlib 0.6.0 to 0.10.2: 2 tried)"


def test_passing_everywhere_is_not_called_a_fix() -> None:
    result, _ = run(history({}, P))
    assert result.summary.startswith("passes on every release tried")


def test_the_reporters_release_is_an_anchor_a_regression_then_a_fix_are_both_found() -> None:
    truth = history({"0.7.1": F, "0.9.2": P}, P)
    result, _ = run(truth, reported="0.8.0")
    found = [(b.before, b.after, b.regression) for b in result.boundaries]
    assert found == [("0.7.0", "0.7.1", True), ("0.9.1", "0.9.2", False)]
    assert result.summary == "fixed in jaxlib 0.9.2 (fails on 0.9.1): upgrade"


def test_releases_that_say_nothing_are_stepped_around() -> None:
    truth = history({"0.8.2": F}, P)
    truth.update({"0.8.1": U, "0.8.0": OTHER, "0.10.2": U})
    result, tried = run(truth)
    [boundary] = result.boundaries
    # 0.8.0 and 0.8.1 could not say: the boundary lies somewhere after 0.7.2, by 0.8.2.
    assert (boundary.before, boundary.after, boundary.exact) == ("0.7.2", "0.8.2", False)
    assert "0.10.2" in tried and result.newest is not None
    assert result.newest.version == "0.10.1"  # the newest that ran: the answer rests on it
    assert "between untried" in result.summary


def test_no_release_that_could_run_it() -> None:
    result, _ = run(dict.fromkeys(VERSIONS, U))
    assert result.summary == "no release could run the replay"
    assert result.boundaries == ()


@pytest.mark.parametrize("seen", [F, P])
def test_one_release_alone(seen: Seen) -> None:
    result = bisect(["0.10.2"], lambda v: Probe(v, seen, "x"))
    assert len(result.probes) == 1
    assert result.summary.endswith("(jaxlib 0.10.2)")


def test_the_record_is_json_of_what_was_tried() -> None:
    result, _ = run(history({"0.8.2": F}, P), reported="0.10.2")
    record = result.to_json()
    assert record["summary"] == result.summary
    assert record["range"] == ["0.6.0", "0.10.2"]
    assert record["boundaries"] == [
        {"before": "0.8.1", "after": "0.8.2", "change": "regression", "exact": True}
    ]
    assert {p["version"] for p in record["probes"]} == {p.version for p in result.probes}
    assert Probe.from_json(record["probes"][0]) == result.probes[0]


def test_newer_releases_that_fail_another_way_are_said_after_the_answer() -> None:
    """The crash's CHECK moved in the newest releases (jaxlib 0.11.2 on, seen for real with
    tests/programs/compile_crash.py): the answer stands, and the change is named."""
    result, tried = run(history({"0.10.0": OTHER}, F))
    assert result.summary == (
        "fails on every release tried (jaxlib 0.6.0 to 0.9.2: 2 tried); it fails another way "
        "from jaxlib 0.10.0 on (3 tried, up to 0.10.2)"
    )
    assert tried[:3] == ["0.10.2", "0.10.1", "0.10.0"]
