"""A dump's replay verdict (``as_found``): a dump records no outcome, so a failure its replay
meets is what the verdict says it reproduced; the JSON, the API and the exit code read that.
Real log excerpts of replays that failed, classified as the judge classifies them."""

from __future__ import annotations

import pytest

from xla_bugkit.failure.classify import Kind, Phase, classify
from xla_bugkit.failure.kinds import KINDS, Shows
from xla_bugkit.replay import as_found, failed
from xla_bugkit.replay.dump import FOUND
from xla_bugkit.verdict import Outcome, Verdict

# The README's example replayed from its dump (jaxlib 0.10.2, CPU): the child's last lines,
# a long line cut in two here only.
CHECK_CRASH = (
    "F1206 14:28:06.096098    4991 buffer_assignment_util.cc:46] Check failed: const_instr == "
    "nullptr (0x7f784c0acd80 vs. (null)) %constant.48 = u32[4]{0} constant({17, 29, 16, 24}) "
    "<65 constant.47 @0>\n"
    "*** Check failure stack trace: ***\n"
    "    @     0x7f789d440634  absl::lts_20260107::log_internal::LogMessage::SendToLog()\n"
)
# tests/programs/compile_error.py's error (jaxlib 0.10.2, CPU), as its module's replay
# raises it too.
COMPILE_ERROR = (
    "jax.errors.JaxRuntimeError: INTERNAL: Too many extra compilation parts due to "
    "non-default options (0). Consider reducing this number or increasing "
    "parallel_codegen_split_count (0)\n"
    "--------------------\n"
    "For simplicity, JAX has removed its internal frames from the traceback of the following "
    "exception. Set JAX_TRACEBACK_FILTERING=off to include these.\n"
)


def _judged(output: str, exit_status: int, phase: Phase) -> Verdict:
    """The verdict the judge gives a dump's failed replay: it expected no failure."""
    failure = classify(output, exit_status=exit_status, timed_out=False, phase=phase)
    evidence = f"the replay failed while compiling: {failure.describe}"
    return Verdict("module_0000.jit_add_noise", Outcome.NOT_REPRODUCED, evidence, "", failure)


@pytest.mark.parametrize(
    ("output", "exit_status", "outcome"),
    [
        (CHECK_CRASH, -6, Outcome.REPRODUCED_CRASH),
        (COMPILE_ERROR, 1, Outcome.REPRODUCED_ERROR),
    ],
    ids=["check-crash", "compile-error"],
)
def test_a_failure_the_replay_met_is_what_it_reproduced(
    output: str, exit_status: int, outcome: Outcome
) -> None:
    judged = _judged(output, exit_status, Phase.COMPILE)
    assert judged.failure is not None
    found = as_found(judged)
    assert found.outcome is outcome and found.reproduced and failed(found)
    # What it rests on: the failure's own line, and the failure itself, kept.
    assert found.evidence == judged.failure.describe
    assert found.failure == judged.failure and found.to_json()["outcome"] == outcome.value


def test_a_verdict_without_a_failure_stays_as_judged() -> None:
    ran = Verdict("m", Outcome.NOT_REPRODUCED, "ran to completion; result agrees", "snapshot")
    assert as_found(ran) is ran and not failed(ran)
    refused = Verdict("m", Outcome.NOT_REPLAYABLE, "elides large constants", "")
    assert as_found(refused) is refused and not failed(refused)


def test_every_failure_kind_is_found_or_left_as_judged_on_purpose() -> None:
    # Not found: the replay's own code failing (a non-XLA exit), a stop, a success: none
    # says anything of the module. A new kind's row places it on one side.
    left = {Kind.EXIT, Kind.INTERRUPTED, Kind.SUCCESS}
    assert {k for k in Kind if KINDS[k].replay_shows is Shows.NOTHING} == left
    assert set(FOUND) | {Shows.NOTHING} == set(Shows) and Shows.NOTHING not in FOUND
