"""The judge of a Pallas kernel's replay against its outputs under Pallas's TPU interpret mode
(``Interpreted``), from real arrays: the compiled kernel differs, the kernel's own code gives
the wrong values, or the interpret mode could not run the kernel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.dumps import dump
from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import KERNEL_ONLY, protocol
from xla_bugkit.replay.inputs import Interpreted, ReplayInput
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.judge_result import judge_result
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.replay.spawn import Child
from xla_bugkit.verdict import INTERPRET_MODE, OWN_CODE, Outcome

# The program's check found a wrong value (jax-ml/jax#39744: a DMA that returns zeros).
CHECKED = Failure(
    kind=Kind.WRONG_RESULT,
    phase=Phase.UNKNOWN,
    headline="AssertionError: first row wrong: 256 of 256 differ",
    signature="AssertionError: first row wrong",
    exit_status=1,
    exception="AssertionError",
)
RIGHT = np.arange(256.0, dtype=np.float32).reshape(2, 128)
ZEROS = np.zeros((2, 128), np.float32)


def replayed(tmp_path: Path, compiled: np.ndarray) -> Child:
    """A replay child that ran the kernel compiled on the TPU: its outputs, and the references
    the kernel kept it from computing."""
    out = tmp_path / "out"
    out.mkdir()
    protocol.save_arrays(protocol.arrays_path(out, protocol.TEST), [compiled])
    for stem in (protocol.OPBYOP, protocol.CONSERVATIVE):
        protocol.error_path(out, stem).write_text(KERNEL_ONLY)
    return Child(proc.Completed(0, "", False, 0.0), out, Phase.RUN, "snapshot", None, tested=True)


def interpreted(tmp_path: Path, outputs: np.ndarray, passed: bool) -> Interpreted:
    path = tmp_path / "interpreted.npz"
    protocol.save_arrays(path, [outputs])
    return Interpreted(path, passed=passed)


def kernel(tmp_path: Path, interpreted: Interpreted | None) -> ReplayInput:
    return ReplayInput("jit_head", tmp_path / "m.hlo.pb", platform="tpu", interpreted=interpreted)


def test_a_compiled_kernel_that_differs_from_its_interpret_mode_reproduces(tmp_path: Path) -> None:
    inp = kernel(tmp_path, interpreted(tmp_path, RIGHT, passed=True))
    verdict = judge_result(inp, replayed(tmp_path, ZEROS), CHECKED, 300)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert verdict.evidence.startswith(
        "the compiled kernel differs from its interpret mode: 255/256 elements differ"
    ), verdict.evidence
    assert verdict.numbers["reference"] == INTERPRET_MODE
    assert KERNEL_ONLY not in verdict.evidence


def test_a_kernel_whose_interpret_mode_gives_the_same_values_is_its_own_codes(
    tmp_path: Path,
) -> None:
    inp = kernel(tmp_path, interpreted(tmp_path, ZEROS, passed=False))
    verdict = judge_result(inp, replayed(tmp_path, ZEROS), CHECKED, 300)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence == (
        "ran to completion; the kernel's own code: its interpret mode gives the same values, "
        "and the program's check fails under it too (not XLA's, not Mosaic's)"
    )
    assert verdict.numbers == {"reference": INTERPRET_MODE, "kernel": OWN_CODE}


def test_agreement_where_the_program_passed_under_interpret_mode_blames_no_kernel(
    tmp_path: Path,
) -> None:
    # The call replayed agrees, yet the program passed under the interpret mode: the wrong
    # value comes from elsewhere, and nothing here says the kernel's code is at fault.
    inp = kernel(tmp_path, interpreted(tmp_path, RIGHT, passed=True))
    verdict = judge_result(inp, replayed(tmp_path, RIGHT), CHECKED, 300)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence == "ran to completion; result agrees with interpret mode"
    assert "kernel" not in verdict.numbers


def test_a_kernel_the_interpret_mode_cannot_run_says_so_plainly(tmp_path: Path) -> None:
    error = "NotImplementedError: interpret mode does not support this DMA"
    inp = kernel(tmp_path, Interpreted(None, error=error, passed=False))
    verdict = judge_result(inp, replayed(tmp_path, ZEROS), CHECKED, 300)
    assert verdict.outcome is Outcome.NOT_REPLAYABLE, verdict.evidence
    assert KERNEL_ONLY in verdict.evidence  # still a kernel nothing checked
    assert verdict.evidence.endswith(f"; Pallas's interpret mode cannot run the kernel: {error}")


def test_without_an_interpret_mode_run_the_kernel_stays_unchecked(tmp_path: Path) -> None:
    verdict = judge_result(kernel(tmp_path, None), replayed(tmp_path, ZEROS), CHECKED, 300)
    assert verdict.outcome is Outcome.NOT_REPLAYABLE
    assert verdict.evidence == f"ran to completion on the TPU; no reference: {KERNEL_ONLY}"


@pytest.mark.slow
def test_a_real_replay_keeps_the_interpret_mode_outputs_it_was_judged_by(tmp_path: Path) -> None:
    """In a real child, on the recorded inputs: the interpret mode's outputs are a reference
    the verdict names, kept beside the replay's arrays (the bundle's expected.npz); on
    generated inputs they are not used."""
    module = dump(tmp_path, "normal").module("jit_f")
    first = tmp_path / "first"
    replay(module, expected=None, options=ReplayOptions(keep_arrays=first))
    outputs = protocol.arrays_path(first, protocol.TEST)  # the right values, as interpreted
    kept = tmp_path / "kept"
    inp = replace(module, interpreted=Interpreted(outputs, passed=True))
    verdict = replay(inp, expected=None, options=ReplayOptions(keep_arrays=kept))
    assert verdict.inputs == "snapshot"
    assert verdict.numbers["reference"] == f"op-by-op, conservative flags, {INTERPRET_MODE}"
    assert verdict.numbers["interpret_check"] == "passed"  # the program's, under that mode
    stored = protocol.arrays_path(kept, protocol.INTERPRETED)
    assert stored.read_bytes() == outputs.read_bytes()
    generated = replay(inp, expected=None, options=ReplayOptions(use_data=False))
    assert INTERPRET_MODE not in str(generated.numbers["reference"])
