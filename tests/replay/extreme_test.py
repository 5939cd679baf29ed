"""Extreme-value inputs for a wrong result that generated inputs do not show: the sets
themselves, and real replays of real jax dumps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.dumps import FAST_MATH, Dumped, dump
from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import children, extreme, protocol, spawn
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.verdict import Outcome, Verdict

pytestmark = pytest.mark.jax  # real jax programs, replay children or jax itself

WRONG = Failure(Kind.WRONG_RESULT, Phase.RUN, "AssertionError: wrong", "AssertionError: wrong")
TYPES = [(np.dtype(np.float32), (4, 3)), (np.dtype(np.int32), (5,)),
         (np.dtype(np.bool_), (2,)), (np.dtype(np.float64), ())]  # fmt: skip


def test_each_set_fills_floats_with_its_extremes_and_keeps_integers_small() -> None:
    nonfinite = extreme.arrays(TYPES, "inf/nan", 42)
    assert [a.dtype for a in nonfinite] == [np.float32, np.int32, np.bool_, np.float64]
    assert [a.shape for a in nonfinite] == [(4, 3), (5,), (2,), ()]
    floats = nonfinite[0].ravel()
    assert np.isposinf(floats).any() and np.isneginf(floats).any() and np.isnan(floats).any()
    assert np.isfinite(floats).sum() >= 6  # mostly ordinary values
    assert nonfinite[1].min() >= 0 and nonfinite[1].max() < 4  # integers index
    biggest = extreme.arrays(TYPES, "max", 42)
    assert set(np.abs(biggest[0]).ravel()) == {np.finfo(np.float32).max}
    assert set(biggest[1]) == {np.iinfo(np.int32).max, np.iinfo(np.int32).min}
    huge = extreme.arrays(TYPES, "huge", 42)[0]
    assert np.isfinite(huge).all() and (np.abs(huge) > np.sqrt(np.finfo(np.float32).max) / 10).any()
    tiny = extreme.arrays(TYPES, "tiny", 42)[0]
    assert (np.abs(tiny) < np.finfo(np.float32).tiny * 10).all()
    assert (tiny == np.finfo(np.float32).smallest_subnormal).any()
    # Seeded: the same set twice is the same arrays.
    again = extreme.arrays(TYPES, "huge", 42)[0]
    assert np.array_equal(again, extreme.arrays(TYPES, "huge", 42)[0])
    # Arrays too small for every other value still meet a NaN first, then the infinities.
    few = extreme.arrays([(np.dtype(np.float32), (4,)), (np.dtype(np.float32), (1,))], "inf/nan", 7)
    assert np.isnan(few[0][0]) and list(few[0][1:3]) == [np.inf, -np.inf]
    assert np.isfinite(few[0][3]) and np.isnan(few[1]).all()
    with pytest.raises(ValueError, match="unknown input set"):
        extreme.arrays(TYPES, "big", 42)


def test_they_are_tried_only_for_a_wrong_result_on_generated_inputs() -> None:
    agreed = Verdict("m", Outcome.NOT_REPRODUCED, "ran to completion", "generated (seed 42)")
    tried: list[str] = []

    def never(name: str) -> Verdict:
        tried.append(name)
        return replace(agreed, inputs=extreme.label(name, 42))

    assert extreme.retry(agreed, None, never) is agreed  # no failure: nothing suspected
    snapshot = replace(agreed, inputs="snapshot")
    assert extreme.retry(snapshot, WRONG, never) is snapshot  # the real inputs said no
    assert not tried
    verdict = extreme.retry(agreed, WRONG, never)
    assert tried == list(extreme.SETS)
    assert verdict.inputs == "generated (seed 42)"
    assert verdict.evidence.endswith("; extreme inputs agreed too (inf/nan, max, huge, tiny)")


@pytest.fixture(scope="module")
def nan_dump(tmp_path_factory: pytest.TempPathFactory) -> Dumped:
    # jnp.where(jnp.isnan(x), 0, x) under fast math without NaN honoured: XLA drops the
    # isnan, so only an input holding a NaN shows the wrong result.
    return dump(tmp_path_factory.mktemp("extreme"), "nan", FAST_MATH)


def test_a_wrong_result_only_nan_shows_is_found_on_the_nonfinite_set(nan_dump: Dumped) -> None:
    module = nan_dump.module("jit__lambda")
    plain = replay(module, expected=None, options=ReplayOptions(use_data=False))
    assert plain.outcome is Outcome.NOT_REPRODUCED, plain.evidence  # normal values agree
    verdict = replay(module, expected=WRONG, options=ReplayOptions(use_data=False))
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert verdict.inputs == "extreme values: inf/nan (seed 42)"
    assert verdict.evidence.endswith(
        "; with generated (seed 42) inputs it agreed with the reference"
    )
    assert verdict.numbers["nans"] and verdict.numbers["reference"] == "op-by-op"


def test_a_correct_module_agrees_on_every_set(nan_dump: Dumped, tmp_path: Path) -> None:
    # The same module without fast math: IEEE semantics on every set, no false alarm.
    module = replace(nan_dump.module("jit__lambda"), xla_flags=())
    verdict = replay(
        module, expected=WRONG, options=ReplayOptions(use_data=False, keep_arrays=tmp_path)
    )
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence.endswith("; extreme inputs agreed too (inf/nan, max, huge, tiny)")
    assert verdict.inputs == "generated (seed 42)"


def test_a_kept_child_tries_the_extreme_sets_itself(
    nan_dump: Dumped, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the replay child is kept (a TPU's: no other process may open the chip while it
    holds it; forced here on the CPU), the extreme sets replay in it too, to the same
    verdict."""
    module = nan_dump.module("jit__lambda")
    fresh = replay(module, expected=WRONG, options=ReplayOptions(use_data=False))
    monkeypatch.setenv(children.KEEP_CHILD, "1")
    pids: list[str | None] = []
    child_of = spawn.child_of

    def watched(done: proc.Completed, out: Path) -> spawn.Child:
        pids.append(protocol.marker(done.output, protocol.PID))
        return child_of(done, out)

    monkeypatch.setattr(spawn, "child_of", watched)
    with children.Spares() as spares:
        kept = replay(module, expected=WRONG, options=ReplayOptions(use_data=False, spares=spares))
    assert (kept.outcome, kept.evidence, kept.inputs) == (
        fresh.outcome,
        fresh.evidence,
        fresh.inputs,
    )
    assert len(pids) == 2 and len(set(pids)) == 1 and None not in pids  # generated, then inf/nan
