"""A program that ended by its own doing, in words no check reads as a wrong value, whose module
a replay proved wrong: the run's failure is that wrong result."""

from __future__ import annotations

from tests.helpers.programs import run_record
from xla_bugkit.collecting.bundling import with_proven_wrong_result
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.verdict import Outcome, Verdict

SAID = "EVAL FAILED: rotation changed the norm of 4 of 65540 points"
OWN = Failure(Kind.EXIT, Phase.UNKNOWN, SAID, SAID, exit_status=1)
WRONG = Verdict(
    "module_0002.jit_rotated_energy",
    Outcome.REPRODUCED_WRONG,
    "result differs from the op-by-op reference: 4/65540 elements differ",
    "generated (seed 42)",
)


def test_a_proven_wrong_value_is_the_runs_failure() -> None:
    run = with_proven_wrong_result(run_record(SAID, OWN), [WRONG])
    assert run.failure.kind is Kind.WRONG_RESULT
    assert run.failure.headline == SAID  # the program's own words stay
    assert run.failure.evidence is not None
    assert "the replay of module_0002.jit_rotated_energy proved a wrong result" in (
        run.failure.evidence
    )


def test_the_programs_own_exception_stays_its_own_failure() -> None:
    raised = Failure(Kind.EXIT, Phase.UNKNOWN, "ValueError: bad batch", "ValueError: bad batch",
                     exit_status=1, exception="ValueError")  # fmt: skip
    assert with_proven_wrong_result(run_record("", raised), [WRONG]).failure is raised
    unproven = Verdict(WRONG.module, Outcome.NOT_REPRODUCED, "ran to completion", WRONG.inputs)
    assert with_proven_wrong_result(run_record(SAID, OWN), [unproven]).failure is OWN
