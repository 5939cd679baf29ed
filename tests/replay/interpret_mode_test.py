"""The pieces the judge takes from a Pallas kernel's outputs under Pallas's TPU interpret
mode, from real arrays: used on the recorded inputs only, standing in for the references
the kernel keeps from being computed, and what the program's check said under the mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xla_bugkit.replay import KERNEL_ONLY, interpret_mode, protocol
from xla_bugkit.replay.inputs import Interpreted, ReplayInput
from xla_bugkit.verdict import INTERPRET_MODE, OWN_CODE, Outcome, Verdict

RIGHT = np.arange(256.0, dtype=np.float32).reshape(2, 128)


def _kernel(tmp_path: Path, passed: bool | None, error: str = "") -> ReplayInput:
    path = tmp_path / "interpreted.npz"
    protocol.save_arrays(path, [RIGHT])
    interpreted = Interpreted(None if error else path, error=error, passed=passed)
    return ReplayInput("jit_head", tmp_path / "m.hlo.pb", platform="tpu", interpreted=interpreted)


def test_the_interpret_modes_outputs_judge_only_a_replay_on_the_recorded_inputs(
    tmp_path: Path,
) -> None:
    inp = _kernel(tmp_path, passed=True)
    assert inp.interpreted is not None
    assert interpret_mode.outputs(inp, "snapshot") == inp.interpreted.outputs
    assert interpret_mode.outputs(inp, "generated (seed 0)") is None
    cannot = _kernel(tmp_path, passed=False, error="NotImplementedError: this DMA")
    assert interpret_mode.outputs(cannot, "snapshot") is None


def test_they_stand_in_for_the_references_the_kernel_kept_from_being_computed(
    tmp_path: Path,
) -> None:
    inp = _kernel(tmp_path, passed=True)
    missing = [f"op-by-op: {KERNEL_ONLY}", f"conservative flags: {KERNEL_ONLY}", "other: why"]
    found, left = interpret_mode.with_outputs(interpret_mode.outputs(inp, "snapshot"), {}, missing)
    assert list(found) == [INTERPRET_MODE]
    assert np.array_equal(found[INTERPRET_MODE][0], RIGHT)
    assert left == ["other: why"]
    assert interpret_mode.with_outputs(None, {}, missing) == ({}, missing)


def test_a_verdict_judged_by_them_keeps_what_the_programs_check_said(tmp_path: Path) -> None:
    judged = Verdict("jit_head", Outcome.REPRODUCED_WRONG, "e", "snapshot",
                     numbers={"reference": INTERPRET_MODE})  # fmt: skip
    passed = interpret_mode.with_check(_kernel(tmp_path, passed=True), judged)
    assert passed.numbers["interpret_check"] == "passed"
    failed = interpret_mode.with_check(_kernel(tmp_path, passed=False), judged)
    assert failed.numbers["interpret_check"] == "failed"
    other = Verdict("jit_head", Outcome.NOT_REPRODUCED, "e", "snapshot",
                    numbers={"reference": "op-by-op"})  # fmt: skip
    assert interpret_mode.with_check(_kernel(tmp_path, passed=True), other) == other


def test_the_kernels_own_code_only_where_the_check_failed_under_the_mode_too(
    tmp_path: Path,
) -> None:
    failed = _kernel(tmp_path, passed=False)
    assert interpret_mode.own_code(failed, [INTERPRET_MODE], suspected=True) == {"kernel": OWN_CODE}
    assert interpret_mode.own_code(failed, ["op-by-op"], suspected=True) == {}
    assert interpret_mode.own_code(failed, [INTERPRET_MODE], suspected=False) == {}
    passed = _kernel(tmp_path, passed=True)
    assert interpret_mode.own_code(passed, [INTERPRET_MODE], suspected=True) == {}


def test_a_kernel_nothing_checked_says_why_its_interpret_mode_did_not(tmp_path: Path) -> None:
    error = "NotImplementedError: interpret mode does not support this DMA"
    said = interpret_mode.unchecked(_kernel(tmp_path, passed=False, error=error))
    assert said == (
        f"ran to completion on the TPU; no reference: {KERNEL_ONLY}; "
        f"Pallas's interpret mode cannot run the kernel: {error}"
    )
