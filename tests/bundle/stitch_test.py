"""Stitching a job's global inputs from its parts' shards: the shards tile the array,
replicas that differ are said, a gap is refused; the same execution is taken from every
part; a part that claims an array its shards could not fill, or shards outside it, is refused
before anything is allocated."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.programs import saved_shards
from xla_bugkit.archive import plan
from xla_bugkit.bundle.stitch import assemble, same_call
from xla_bugkit.errors import BugkitError
from xla_bugkit.run import shards
from xla_bugkit.run.shards import Param, PartShards, Shard


def _part(process: int, rows: list[tuple[int, int]], values: np.ndarray) -> PartShards:
    """A process's shards of one (8, 2) parameter: ``rows`` (start, stop) of ``values``."""
    shards = tuple(
        Shard(k, 2 * process + k, process, ((a, b), (0, 2))) for k, (a, b) in enumerate(rows)
    )
    arrays = tuple(values[a:b] for a, b in rows)
    return PartShards((Param((8, 2), (0, 1, 2, 3), shards),), arrays)


def test_the_shards_of_every_part_tile_the_global_array() -> None:
    whole = np.arange(16, dtype=np.float32).reshape(8, 2)
    arrays, notes = assemble(
        {1: _part(1, [(4, 6), (6, 8)], whole), 0: _part(0, [(0, 2), (2, 4)], whole)}
    )
    assert np.array_equal(arrays[0], whole) and arrays[0].dtype == np.float32
    assert notes == []


def test_replicas_that_differ_are_said_and_the_first_parts_values_kept() -> None:
    mine = np.arange(16, dtype=np.float64).reshape(8, 2)
    theirs = mine.copy()
    theirs[0, 0] = np.nan
    arrays, notes = assemble(
        {0: _part(0, [(0, 4), (4, 8)], mine), 1: _part(1, [(0, 4), (4, 8)], theirs)}
    )
    assert np.array_equal(arrays[0], mine)
    assert notes == [
        "parameter 0: replicas of one shard differ between part 0 and part 1; the values of "
        "part 0 are used"
    ]
    # A NaN replicated alike is no difference.
    arrays, notes = assemble({0: _part(0, [(0, 8)], theirs), 1: _part(1, [(0, 8)], theirs.copy())})
    assert notes == [] and np.isnan(arrays[0][0, 0])


def test_shards_that_leave_a_gap_are_refused() -> None:
    whole = np.ones((8, 2), np.int32)
    # Replicas of rows 0:2 make up the count; rows 6:8 are still no one's.
    with pytest.raises(BugkitError, match="the shards cover 12 of its 16 elements"):
        assemble({0: _part(0, [(0, 2), (2, 4)], whole), 1: _part(1, [(0, 2), (4, 6)], whole)})
    with pytest.raises(BugkitError, match="of 16 elements, and their shards hold 12"):
        assemble({0: _part(0, [(0, 2), (2, 4)], whole), 1: _part(1, [(4, 6)], whole)})


# A part's layout as the start-up hook writes it (``hook.shards``), of one (8, 2) float32
# array sharded by rows over 4 devices: its numbers up to the shards, then 7 per shard.
BODY = """
rows = NamedSharding(Mesh(np.array(jax.devices()), ("r",)), P("r"))
save(1, [jax.device_put(np.arange(16, dtype=np.float32).reshape(8, 2), rows)])
"""
Saved = tuple[list[np.ndarray], np.ndarray]  # the saved arrays, and last the layout
Asked = list[tuple[int, ...]]
DIMS, SHARDS = 6, 14  # where the global dims and the first shard begin in that layout
PER_SHARD = 7  # array, device, process, and (start, stop) per dimension


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Saved:
    """The arrays and layout the hook's own writer saved of a real sharded jax array."""
    *arrays, layout = saved_shards(tmp_path_factory.mktemp("shards"), BODY, 1)
    assert list(layout[DIMS : DIMS + 2]) == [8, 2] and layout[SHARDS - 1] == 4
    return arrays, layout


@pytest.fixture
def small_only(monkeypatch: pytest.MonkeyPatch) -> Asked:
    """Every shape numpy is asked to fill while stitching; one past a thousand elements
    fails the test, as a hostile part's claimed shape would be allocated."""
    asked: list[tuple[int, ...]] = []
    for name in ("zeros", "full"):
        real = getattr(np, name)

        def guarded(shape: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            asked.append(tuple(np.atleast_1d(shape)))
            assert math.prod(asked[-1]) <= 1000, f"allocated {asked[-1]}"
            return _real(shape, *args, **kwargs)

        monkeypatch.setattr(np, name, guarded)
    return asked


def _read(arrays: list[np.ndarray], layout: np.ndarray) -> PartShards:
    return PartShards(shards.parse_layout(layout, len(arrays))[0], tuple(arrays))


@pytest.mark.jax
def test_the_hooks_own_shards_stitch_within_the_checks(saved: Saved, small_only: Asked) -> None:
    arrays, layout = saved
    [whole], notes = assemble({0: _read(arrays, layout)})
    assert np.array_equal(whole, np.arange(16, dtype=np.float32).reshape(8, 2)) and not notes
    assert small_only == [(8, 2), (8, 2)]  # the array and whose value each element is


def _altered(layout: np.ndarray, changes: dict[int, int]) -> np.ndarray:
    out = layout.copy()
    for at, value in changes.items():
        out[at] = value
    return out


def _bound(shard: int, k: int) -> int:
    """Where shard ``shard``'s ``k``-th bound number (start0, stop0, start1, stop1) is."""
    return SHARDS + shard * PER_SHARD + 3 + k


@pytest.mark.jax
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {DIMS: 1_000_000, DIMS + 1: 1_000_000},
            "parameter 0: the parts claim a global shape (1000000, 1000000) of "
            "1,000,000,000,000 elements, and their shards hold 16",
        ),
        (
            {DIMS: 9},
            "the parts claim a global shape (9, 2) of 18 elements, and their shards hold 16",
        ),
        ({DIMS: -8}, "parameter 0: a global shape (-8, 2) with a negative dimension"),
        (
            {_bound(0, 0): -2},
            "parameter 0: part 0's shard at [-2:2, 0:2] is not a place in its global shape (8, 2)",
        ),
        ({_bound(1, 0): 4, _bound(1, 1): 2}, "part 0's shard at [4:2, 0:2] is not a place"),
        (
            {_bound(3, 1): 9},
            "part 0's shard at [6:9, 0:2] is not a place in its global shape (8, 2)",
        ),
        ({_bound(3, 3): 1 << 40}, f"part 0's shard at [6:8, 0:{1 << 40}] is not a place"),
    ],
)
def test_a_part_claiming_more_than_its_shards_is_refused_before_allocating(
    saved: Saved, small_only: Asked, changes: dict[int, int], message: str
) -> None:
    arrays, layout = saved
    with pytest.raises(BugkitError) as refused:
        assemble({0: _read(arrays, _altered(layout, changes))})
    assert message in str(refused.value)
    assert small_only == []


@pytest.mark.jax
def test_entries_naming_one_array_again_and_again_do_not_count_its_elements_twice(
    saved: Saved, small_only: Asked
) -> None:
    """The hook saves a shard several devices hold once, with one entry per device: a part
    whose thousand entries all name one (2, 2) array holds 4 elements, not 4,000."""
    arrays, layout = saved
    entries = [[0, 0, 0, 2 * j, 2 * j + 2, 0, 2] for j in range(1000)]
    forged = np.concatenate(
        [layout[:DIMS], [2000, 2], layout[DIMS + 2 : SHARDS - 1], [1000], np.ravel(entries)]
    ).astype(np.int64)
    with pytest.raises(BugkitError, match=r"of 4,000 elements, and their shards hold 4\b"):
        assemble({0: _read(arrays[:1], forged)})
    assert small_only == []


@pytest.mark.jax
def test_a_part_of_absurd_or_negative_rank_is_refused(saved: Saved, small_only: Asked) -> None:
    arrays, layout = saved
    rank, extra = 40, 38
    head = [*layout[: DIMS - 1], rank, 8, 2, *[1] * extra, *layout[DIMS + 2 : SHARDS]]
    body = [
        [*layout[at : at + PER_SHARD], *[0, 1] * extra]
        for at in range(SHARDS, len(layout), PER_SHARD)
    ]
    deep = np.asarray([*head, *np.ravel(body)], dtype=np.int64)
    with pytest.raises(BugkitError, match="parameter 0: a global shape of 40 dimensions"):
        assemble({0: _read(arrays, deep)})
    with pytest.raises(BugkitError, match="its shards' layout is damaged"):
        _read(arrays, _altered(layout, {DIMS - 1: -1}))
    assert small_only == []


@pytest.mark.jax
def test_stitched_arrays_past_the_room_an_archive_has_are_refused(
    saved: Saved, small_only: Asked
) -> None:
    arrays, layout = saved
    with pytest.raises(
        BugkitError,
        match=r"the stitched arrays would take 64 bytes, past the 60 left of what a bundle's "
        rf"archive may hold \({plan.MAX_TOTAL:,}\)",
    ):
        assemble({0: _read(arrays, layout)}, room=60)
    assert small_only == []
    assert len(assemble({0: _read(arrays, layout)}, room=64)[0]) == 1


def _kept(*calls: int) -> dict[int | None, tuple[Path, PartShards]]:
    """A part's files of one module: the executions it kept (its first and its newest)."""
    whole = np.arange(16, dtype=np.float32).reshape(8, 2)
    return {c: (Path(f"shards-{c}.pb"), _part(0, [(0, 8)], whole)) for c in calls}


def test_every_parts_newest_execution_is_stitched_where_they_agree() -> None:
    call, files, said = same_call({0: _kept(1, 16), 1: _kept(1, 16)}, failing=1)
    assert call == 16 and said == []
    assert {i: path.name for i, (path, _) in files.items()} == {
        0: "shards-16.pb",
        1: "shards-16.pb",
    }


def test_parts_whose_newest_differ_give_the_newest_they_all_kept_and_say_so() -> None:
    # Part 0 went on to the next step before its job took it down.
    call, files, said = same_call({0: _kept(1, 17), 1: _kept(1, 16)}, failing=1)
    assert call == 1 and {path.name for path, _ in files.values()} == {"shards-1.pb"}
    assert said == [
        "the parts' newest executions of it differ (part 0: 17, part 1: 16); stitched from "
        "execution 1, the newest every part kept"
    ]
    with pytest.raises(BugkitError, match=r"differ \(part 0: 17, part 1: 16\), and they kept"):
        same_call({0: _kept(17), 1: _kept(1, 16)}, failing=1)
