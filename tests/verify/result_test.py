"""verify's one answer (``VerifyResult.found``) and what renders it: the exit code, the
JSON's ``found``, ``reproduced``, ``unverified`` and ``exit_code``, and the text's last line.
The real bundles in every view are in tests/views_test.py; these are the three answers
without a replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.cli.commands.verify import conclusion, render_table
from xla_bugkit.errors import ExitCode
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay import Unverified
from xla_bugkit.verdict import Outcome, Verdict
from xla_bugkit.verify.result import Found, ModuleCheck, VerifyResult

CRASH = Failure(
    Kind.COMPILE_CRASH,
    Phase.COMPILE,
    "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr",
    "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr",
    exit_status=-6,
    signal="SIGABRT",
)
LABEL = "module_0000.jit_add_noise"


def _check(outcome: Outcome) -> ModuleCheck:
    failure = CRASH if outcome is Outcome.REPRODUCED_CRASH else None
    verdict = Verdict(LABEL, outcome, "evidence", "generated (seed 42)", failure)
    return ModuleCheck(LABEL, verdict, Outcome.REPRODUCED_CRASH.value)


ON_A_TPU = ModuleCheck(
    LABEL,
    None,
    Outcome.REPRODUCED_ERROR.value,
    Unverified("a TPU", ("integrity ok",), "ran to completion", "xla-bugkit verify b.zip"),
)
CASES = {
    "reproduced": ((_check(Outcome.REPRODUCED_CRASH),), Found.REPRODUCED, ExitCode.OK),
    "not reproduced": (
        (_check(Outcome.NOT_REPRODUCED),),
        Found.NOT_REPRODUCED,
        ExitCode.NOT_REPRODUCED,
    ),
    "needs a TPU": ((ON_A_TPU,), Found.UNVERIFIED, ExitCode.UNVERIFIED),
    "refused": ((_check(Outcome.NOT_REPLAYABLE),), Found.UNVERIFIED, ExitCode.UNVERIFIED),
}


@pytest.mark.parametrize(("checks", "found", "code"), CASES.values(), ids=list(CASES))
def test_every_view_renders_the_one_answer(
    checks: tuple[ModuleCheck, ...], found: Found, code: ExitCode
) -> None:
    result = VerifyResult(Path("b.zip"), CRASH, checks)
    assert (result.found, result.exit_code) == (found, code)
    data = result.to_json()
    assert (data["found"], data["exit_code"]) == (found.value, int(code))
    assert data["reproduced"] is result.reproduced is (found is Found.REPRODUCED)
    assert data["unverified"] is result.unverified is (found is Found.UNVERIFIED)
    last = render_table(result).splitlines()[-1]
    assert last == conclusion(result)
    assert last.startswith(
        {
            Found.REPRODUCED: "the recorded failure reproduces here",
            Found.NOT_REPRODUCED: "the recorded failure does NOT reproduce here",
            Found.UNVERIFIED: "the recorded failure is unverified here: ",
        }[found]
    )
