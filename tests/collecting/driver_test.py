"""collect's driver: when the program can run a second time."""

from __future__ import annotations

import sys

from tests.helpers.programs import run_record
from xla_bugkit.collecting.driver import _cannot_run_again


def test_a_program_read_from_standard_input_cannot_run_a_second_time() -> None:
    consumed = "Python read the program from standard input, which the first run consumed"
    assert _cannot_run_again([sys.executable, "-"]) == consumed
    assert _cannot_run_again(["python3", "-u", "-X", "dev", "-"]) == consumed
    assert _cannot_run_again(["python"]) == consumed
    # A script, a module or a command line is read again as it was.
    assert _cannot_run_again(["python", "train.py", "-"]) is None
    assert _cannot_run_again(["python", "-m", "pkg.main"]) is None
    assert _cannot_run_again(["python", "-c", "import train"]) is None
    assert _cannot_run_again(["bash", "run.sh"]) is None


def test_a_part_of_a_job_never_runs_again_alone() -> None:
    """Alone, a process of a job waits in jax.distributed.initialize for peers that never
    come: a part says so, and what its one run kept instead."""
    from xla_bugkit.collecting import job

    part = job.parse("1/4")
    kept = _cannot_run_again(["python", "train.py"], part, every=True)
    assert kept is not None and kept.startswith("this run is part 1 of 4 of a job (--job-part)")
    assert kept.endswith("its one run kept XLA's snapshot of every execution instead")
    first = _cannot_run_again(["python", "train.py"], part, every=False)
    assert first is not None and first.endswith(
        "give --job-part I/N to keep XLA's snapshot of every execution in its one run"
    )


def test_a_part_keeps_every_snapshot_unless_asked_otherwise() -> None:
    from xla_bugkit.collecting import job
    from xla_bugkit.collecting.options import CollectOptions
    from xla_bugkit.run.capture import EVERY, FIRST

    assert CollectOptions().capture.mode == FIRST
    assert CollectOptions(job_part=job.parse("0/2")).capture.mode == EVERY
    assert CollectOptions(job_part=job.parse("0/2"), snapshots=FIRST).capture.mode == FIRST


def test_a_wrong_value_no_replay_showed_names_the_runs_own_flags_first() -> None:
    from xla_bugkit.collecting.own_flags import unproven_wrong_result
    from xla_bugkit.failure.classify import classify
    from xla_bugkit.verdict import Outcome, Verdict

    fast = ("--xla_cpu_enable_fast_math=true", "--xla_cpu_fast_math_honor_nans=false")
    output = "AssertionError: masked loss is NaN at steps [36]\n"
    run = run_record(output, classify(output, exit_status=1), user_flags=fast)
    agreed = Verdict("module_0012.jit_step", Outcome.NOT_REPRODUCED, "ran to completion", "x")
    said = unproven_wrong_result(run, [agreed])
    assert said is not None and said.startswith(
        f"this run set its own XLA flags ({' '.join(fast)})"
    )
    assert "such as fast math, change results on purpose" in said
    assert unproven_wrong_result(run, []) is None  # no replay ran with them


def test_the_run_ended_names_whose_signal_it_was() -> None:
    from dataclasses import replace

    from xla_bugkit.collecting.running import _how_it_ended
    from xla_bugkit.failure.classify import classify

    output = "F0000 buffer_assignment_util.cc:46] Check failed: const_instr == nullptr\n"
    aborted = classify(output, exit_status=-6)
    assert _how_it_ended(run_record(output, aborted, exit_status=-6)) == (
        f"{aborted.kind.value} (SIGABRT)"
    )
    # A worker of the program died on SIGABRT (its record says so); the program exited 1.
    worker = run_record(output, replace(aborted, exit_status=1), exit_status=1)
    assert _how_it_ended(worker) == (
        f"{aborted.kind.value} (SIGABRT in a process it started; the program exited with status 1)"
    )


def test_a_wrong_value_only_fast_math_flags_make_is_what_they_allow() -> None:
    from xla_bugkit.bundle.own_flags import OwnFlags
    from xla_bugkit.bundle.triage import triage
    from xla_bugkit.failure.classify import Failure, Kind, Phase
    from xla_bugkit.verdict import Outcome, Verdict

    agreed = Verdict(
        "module_0010.jit_eval_error",
        Outcome.NOT_REPRODUCED,
        "ran to completion; result agrees with op-by-op, conservative flags",
        "snapshot",
        numbers={"reference": "op-by-op, conservative flags"},
    )
    fast = ("--xla_cpu_enable_fast_math=true", "--xla_cpu_fast_math_honor_nans=false")
    own = OwnFlags(fast, agreed, wrong_result=True)
    assert own.relaxing == fast
    # A pass disabled beside them, or a crash, is no licence of theirs.
    assert OwnFlags((*fast, "--xla_disable_hlo_passes=algsimp"), agreed, True).relaxing == ()
    assert OwnFlags(fast, agreed, wrong_result=False).relaxing == ()
    wrong = Failure(Kind.WRONG_RESULT, Phase.RUN, "eval mismatch", "eval mismatch")
    reproduced = Verdict("module_0010.jit_eval_error", Outcome.REPRODUCED_WRONG, "differs", "x")
    judged = triage(wrong, [reproduced], relaxed_by=own.relaxing)
    assert not judged.xla
    assert judged.reason.startswith(
        "the result differs only under the run's own XLA flags that let XLA change "
        "floating-point results on purpose (--xla_cpu_enable_fast_math=true "
        "--xla_cpu_fast_math_honor_nans=false"
    )
    assert triage(wrong, [reproduced]).xla  # without that finding, the replay stands


def test_the_reports_failure_line_names_a_workers_signal_apart_from_the_programs_exit() -> None:
    from dataclasses import replace

    from xla_bugkit.bundle.report import _exit_text
    from xla_bugkit.failure.classify import classify

    output = "F0000 buffer_assignment_util.cc:46] Check failed: const_instr == nullptr\n"
    aborted = classify(output, exit_status=-6)
    assert _exit_text(run_record(output, aborted, exit_status=-6)) == "killed by SIGABRT"
    worker = run_record(output, replace(aborted, exit_status=1), exit_status=1)
    assert _exit_text(worker) == (
        "SIGABRT in a process it started; the program exited with status 1"
    )
