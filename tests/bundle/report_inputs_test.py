"""What ISSUE.md says of a failure shown on real inputs the size budget left out: whether
the bundle, replayed on generated inputs, shows it too."""

from __future__ import annotations

from xla_bugkit.bundle import report
from xla_bugkit.bundle.triage import triage
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.replay.verdict import Outcome, Verdict

CRASH = Failure(Kind.CRASH, Phase.RUN, "killed by SIGSEGV", "killed by SIGSEGV", -11, "SIGSEGV")
LABEL = "module_0010.jit_log_likelihood"


def _line(as_bundled: Verdict | None) -> str:
    proof = Verdict(LABEL, Outcome.REPRODUCED_CRASH, "killed by SIGSEGV", "snapshot", CRASH)
    staged = report.Staged(
        None, None, True, inputs_left_out="left out to fit the size budget", as_bundled=as_bundled
    )
    return report._replay_line(triage(CRASH, [proof]), [proof], staged)


def test_the_bundles_own_replay_on_generated_inputs_is_said() -> None:
    again = Verdict(LABEL, Outcome.REPRODUCED_CRASH, "killed", "generated (seed 42)", CRASH)
    assert _line(again).endswith(
        "replayed from the bundle on generated inputs, it reproduces as well (reproduced: "
        "crash, generated (seed 42))."
    )
    ran = Verdict(LABEL, Outcome.NOT_REPRODUCED, "ran to completion", "generated (seed 42)")
    assert _line(ran).endswith(
        "replayed from the bundle on generated inputs it did not reproduce (not reproduced: "
        "ran to completion): it needs the real inputs."
    )
    assert _line(None).endswith("it runs on generated inputs, which may not show it.")
