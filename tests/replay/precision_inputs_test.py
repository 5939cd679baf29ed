"""Every input the wrong-result search tries is judged against the TPU's default precision.

A TPU runs a float32 dot at the default precision as one bfloat16 pass. The judge already
excuses a difference the module's HIGHEST-precision run does not show; on top of that, an
input beyond bfloat16's range (the ``max`` extreme set: float32's largest, 3.40e38) becomes
infinite in that pass, and at HIGHEST too (its first bfloat16 part is the same rounding),
and inputs whose products overflow float32 (``huge``) overflow or not as the rounding of
their operands decides: such inputs prove nothing of a module with default-precision dots
on a TPU. On the CPU, whose float32 dots are exact float32 and which runs no HIGHEST pass,
nothing changes.

There is no TPU here: the TPU's arithmetic is played with ml_dtypes' bfloat16 (its operands
rounded to bfloat16, the products summed in float32), as the chip's MXU does it.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import extreme, protocol
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.judge_result import judge_result
from xla_bugkit.replay.spawn import Child
from xla_bugkit.verdict import Outcome, Verdict

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_bfloat16s_largest_value_is_the_one_the_judge_uses() -> None:
    assert float(ml_dtypes.finfo(BF16).max) == extreme.BFLOAT16_MAX


@pytest.mark.parametrize("name", extreme.SETS)
def test_a_set_is_out_of_range_when_bfloat16_rounding_decides_overflow(name: str) -> None:
    """Read from the values the set makes: finite in float32 and infinite once rounded to
    bfloat16 (what a default-precision TPU dot does to its operands), or with products
    beyond float32's largest."""
    (values,) = extreme.arrays([(np.dtype(np.float32), (64, 64))], name, seed=3)
    finite = np.isfinite(values)
    overflows = bool(np.any(finite & ~np.isfinite(values.astype(BF16))))
    top = float(np.abs(values[finite]).astype(np.float64).max())
    products_overflow = top * top > float(np.finfo(np.float32).max)
    said = extreme.out_of_range(name)
    assert (said is not None) is (overflows or products_overflow)
    assert (said is not None) is (name in ("max", "huge"))
    if overflows:
        assert said is not None and said.startswith("beyond bfloat16's range (|x| > 3.39e+38)")


def _tpu_default(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w`` as a TPU computes it at the default precision: operands in bfloat16."""
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(BF16).astype(np.float32) @ w.astype(BF16).astype(np.float32)


def _child(out: Path, test: np.ndarray, reference: np.ndarray, highest: np.ndarray | None) -> Child:
    protocol.save_arrays(protocol.arrays_path(out, protocol.TEST), [test])
    protocol.save_arrays(protocol.arrays_path(out, protocol.OPBYOP), [reference])
    protocol.error_path(out, protocol.CONSERVATIVE).write_text("not asked")
    if highest is not None:  # the child runs the HIGHEST pass only for such a TPU module
        protocol.save_arrays(protocol.arrays_path(out, protocol.HIGHEST), [highest])
    done = proc.Completed(0, "", False, 0.0)
    return Child(done, out, Phase.RUN, "extreme values: max (seed 0)", None, tested=True)


INP = ReplayInput("jit_dense", Path("m.hlo.pb"), platform="tpu")


@pytest.fixture
def on_max(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray, np.ndarray]:
    """The held-out's dense layer on the ``max`` set: x is ±float32's largest, w a small
    constant. The reference (float32 on the CPU) has numbers; the TPU's bfloat16 pass turns
    x into ±infinity and every output into NaN, at HIGHEST as well."""
    (x,) = extreme.arrays([(np.dtype(np.float32), (128, 64))], "max", seed=0)
    w = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32) / 4096
    reference = x.astype(np.float64) @ w.astype(np.float64)
    test = _tpu_default(x, w)
    assert np.isnan(test).all() and np.isfinite(reference).all()
    return tmp_path, test, reference.astype(np.float32), test.copy()


def test_inputs_beyond_bfloat16_prove_nothing_of_a_default_precision_tpu_module(
    on_max: tuple[Path, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    out, test, reference, highest = on_max
    why = extreme.out_of_range("max")
    verdict = judge_result(INP, _child(out, test, reference, highest), None, 300, why)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.numbers["precision"] == "default"
    assert verdict.numbers["inputs"] == extreme.OUT_OF_RANGE
    assert verdict.numbers["nans"] == 128 * 256  # what it rests on: the comparison, said
    assert "32768 NaN where the reference has a number" in verdict.evidence
    assert "inputs beyond bfloat16's range (|x| > 3.39e+38)" in verdict.evidence


def test_the_same_difference_on_inputs_within_range_is_a_wrong_result(
    on_max: tuple[Path, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """Where HIGHEST does not agree with the reference either and the inputs are within
    bfloat16's range, the difference is the module's: reproduced, as before."""
    out, test, reference, highest = on_max
    verdict = judge_result(INP, _child(out, test, reference, highest), None, 300, None)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert "precision" not in verdict.numbers


def test_a_cpu_module_is_judged_as_before_on_any_inputs(
    on_max: tuple[Path, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """No HIGHEST pass on the CPU (its float32 dots are float32): the max set's difference
    stands."""
    out, test, reference, _ = on_max
    cpu = ReplayInput("jit_dense", Path("m.hlo.pb"), platform="cpu")
    verdict = judge_result(cpu, _child(out, test, reference, None), None, 300, "beyond")
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert "32768 NaN where the reference has a number" in verdict.evidence


def test_highest_agreeing_still_excuses_real_inputs(tmp_path: Path) -> None:
    """The excuse that was there for real inputs holds as it was: a HIGHEST run that
    agrees with the reference, whatever the inputs (and says that, not their range)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    exact = (x.astype(np.float64) @ w.astype(np.float64)).astype(np.float32)
    child = _child(tmp_path, _tpu_default(x, w), exact, exact.copy())
    verdict = judge_result(INP, child, None, 300, extreme.out_of_range("huge"))
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.numbers["precision"] == "default" and "inputs" not in verdict.numbers
    assert "with every dot at precision HIGHEST the result agrees with it" in verdict.evidence


WRONG = Failure(Kind.WRONG_RESULT, Phase.UNKNOWN, "dense: max error 0.0109 > 1e-5", "dense")


def test_the_search_goes_on_past_a_set_that_proves_nothing_and_says_so() -> None:
    """extreme.retry on generated inputs excused at the default precision: ``max`` and
    ``huge`` prove nothing there (no wrong result), and the others agree; the verdict lists
    each."""
    first = Verdict("jit_dense", Outcome.NOT_REPRODUCED, "ran to completion; differs ...",
                    "generated (seed 0)", None, {"precision": "default"})  # fmt: skip
    tried: list[str] = []

    def replay(name: str) -> Verdict:
        tried.append(name)
        out = {"precision": "default", "inputs": extreme.OUT_OF_RANGE}
        numbers = out if extreme.out_of_range(name) else {}
        return Verdict("jit_dense", Outcome.NOT_REPRODUCED, "ran", extreme.label(name, 0),
                       None, numbers)  # fmt: skip

    verdict = extreme.retry(first, WRONG, replay)
    assert tried == list(extreme.SETS)
    assert verdict.outcome is Outcome.NOT_REPRODUCED
    assert verdict.evidence.endswith(
        "; extreme inputs agreed too (inf/nan, max (out of range at the default precision: "
        "proves nothing), huge (out of range at the default precision: proves nothing), tiny)"
    )
