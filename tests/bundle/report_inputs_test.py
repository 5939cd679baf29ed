"""What ISSUE.md says of a failure shown on real inputs the size budget left out: whether
the bundle, replayed on generated inputs, shows it too."""

from __future__ import annotations

from dataclasses import replace

from tests.helpers.programs import run_record
from xla_bugkit.bundle import report
from xla_bugkit.bundle.triage import triage
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.verdict import Outcome, Verdict

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


def test_a_failing_process_the_command_started_is_named_by_its_own_arguments() -> None:
    runs_as = report._runs_as
    assert runs_as(["train.py", "--lr", "3"], ["python", "train.py", "--lr", "3"])
    assert runs_as(["/work/p/train.py"], ["/venv/bin/python", "/work/p/train.py"])
    assert runs_as(["/v/lib/heatsim/solve.py"], ["python", "-m", "heatsim.solve"])
    assert runs_as(
        ["/v/lib/pytest/__main__.py", "-q", "t.py"], ["python", "-m", "pytest", "-q", "t.py"]
    )
    assert runs_as(["/venv/bin/pytest", "t.py"], ["pytest", "t.py"])
    assert runs_as(["-c"], ["python", "-c", "import jax"])
    # A launcher's child, a shell script's Python, a notebook's kernel: not the command's own.
    assert not runs_as(["train.py", "--data", "d.npz"], ["python", "launch.py"])
    assert not runs_as(["train.py"], ["bash", "run.sh"])
    assert not runs_as(["/v/ipykernel_launcher.py", "-f", "k.json"], ["jupyter", "execute", "n"])


def test_a_spawned_worker_with_its_parents_arguments_is_still_said_to_be_a_child() -> None:
    from xla_bugkit.run.evidence import ProcessEvidence
    from xla_bugkit.run.processes import Culprit

    parent = ProcessEvidence(100, 1, ("sweep.py",), (), platform="cpu")
    worker = ProcessEvidence(101, 100, ("sweep.py",), (), platform="cpu")
    culprit = Culprit(worker, "it crashed", (parent,))
    run = run_record("", CRASH, command=("python", "sweep.py"), culprit=culprit)
    assert report._failing_child(run) is None  # multiprocessing gave it the parent's argv
    assert report._started_by(run) == (101, 100)
    alone = replace(run, culprit=Culprit(parent, "it crashed", ()))
    assert report._started_by(alone) is None


def test_a_worker_whose_parent_never_started_xla_is_still_said_to_be_a_child() -> None:
    from xla_bugkit.run.evidence import ProcessEvidence
    from xla_bugkit.run.processes import failing

    # A process pool's parent only hands out work: it records itself, with no backend.
    parent = ProcessEvidence(100, 1, ("augment.py",), ())
    worker = ProcessEvidence(101, 100, ("augment.py",), (), platform="cpu")
    culprit = failing([parent, worker])
    assert culprit is not None and culprit.process is worker and culprit.others == ()
    run = run_record("", CRASH, command=("python", "augment.py"), culprit=culprit)
    assert report._started_by(run) == (101, 100)
