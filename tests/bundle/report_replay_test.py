"""What ISSUE.md says of the replay: nothing of a replay that did not run, and a replay that
hung where the program ended itself is the proof, not a replay that did not reproduce."""

from __future__ import annotations

from xla_bugkit.bundle import report
from xla_bugkit.bundle.triage import triage
from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.verdict import Outcome, Verdict

STAGED = report.Staged(None, None, replayed=True)
REFUSED = Verdict(
    "module_0002.jit_calibrate",
    Outcome.NOT_REPLAYABLE,
    "the module calls back into Python (custom-call xla_ffi_python_cpu_callback); host "
    "callbacks cannot run outside the original process",
    "",
)
STOPPED = Failure(Kind.HANG, Phase.RUN, "XLA was executing jit(calibrate); killed after the "
                  "timeout", "hang", stopped_by="timeout", executing="calibrate")  # fmt: skip


def test_a_replay_that_could_not_run_is_not_said_to_have_not_reproduced() -> None:
    line = report._replay_line(triage(STOPPED, [REFUSED]), [REFUSED], STAGED)
    assert "did not reproduce" not in line
    assert line == (
        "No replay ran: the replay of `module_0002.jit_calibrate` could not run (the module "
        "calls back into Python (custom-call xla_ffi_python_cpu_callback); host callbacks "
        "cannot run outside the original process), so nothing shows yet that it reproduces."
    )


def test_a_replay_that_ran_and_did_not_reproduce_says_so() -> None:
    ran = Verdict("module_0002.jit_calibrate", Outcome.NOT_REPRODUCED, "ran to completion", "x")
    line = report._replay_line(triage(STOPPED, [REFUSED, ran]), [REFUSED, ran], STAGED)
    assert line == "The bundle's replay did not reproduce it on the reporter's machine."


def test_a_replay_that_hung_where_the_program_ended_itself_is_the_proof_in_the_table() -> None:
    own = classify("recalibration exceeded the 20s SLA\n", exit_status=75)
    hung = Verdict(
        "module_0006.jit_recalibrate",
        Outcome.NOT_REPRODUCED,
        "no result after 40 s while running (a hang, though non-XLA failure was expected)",
        "snapshot",
        classify("", exit_status=-9, timed_out=True, phase=Phase.RUN),
    )
    judged = triage(own, [hung])
    assert report._outcome(hung, judged) == "hangs (the run ended otherwise)"
    assert report._replay_line(judged, [hung], STAGED) == (
        "Replaying `module_0006.jit_recalibrate` from the bundle reproduces it without the "
        "original program."
    )
    ran = Verdict("module_0006.jit_recalibrate", Outcome.NOT_REPRODUCED, "ran to completion", "x")
    assert report._outcome(ran, triage(own, [ran])) == "not reproduced"
