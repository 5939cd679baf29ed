"""Stitching a job's global inputs from its parts' shards: the shards tile the array,
replicas that differ are said, a gap is refused; the same execution is taken from every
part."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xla_bugkit.bundle.stitch import assemble, same_call
from xla_bugkit.errors import BugkitError
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
    with pytest.raises(BugkitError, match="the shards cover 12 of its 16 elements"):
        assemble({0: _part(0, [(0, 2), (2, 4)], whole), 1: _part(1, [(4, 6)], whole)})


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
