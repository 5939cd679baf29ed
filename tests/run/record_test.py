"""What a run's record says the failing process ran with: its TPU compiler's flags."""

from __future__ import annotations

from tests.helpers.programs import run_record
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.run.evidence import ProcessEvidence
from xla_bugkit.run.processes import Culprit
from xla_bugkit.run.record import RunRecord

ERROR = Failure(Kind.COMPILE_ERROR, Phase.COMPILE, "E1001", "RESOURCE_EXHAUSTED: E1001: ...")
# LIBTPU_INIT_ARGS in a process's record at its TPU backend's start on a TPU v5e (jax 0.10.2):
# jax's cloud_tpu_init appends its own flag to whatever the user set, or to nothing.
BARE = " --xla_tpu_use_enhanced_launch_barrier=true"
SET = (
    "--xla_tpu_scoped_vmem_limit_kib=4096 --xla_mosaic_dump_to=/w/dumps/mosaic"
    " --xla_tpu_use_enhanced_launch_barrier=true"
)


def _run(env_value: str, user: tuple[str, ...]) -> RunRecord:
    process = ProcessEvidence(
        7, 1, ("prog.py",), (), platform="tpu", env={"LIBTPU_INIT_ARGS": env_value}
    )
    return run_record(
        "",
        ERROR,
        user_flags=("--xla_dump_to=/w/dumps",),
        culprit=Culprit(process, "it failed"),
        tpu_args=user,
    )


def test_the_flag_jax_adds_by_itself_is_not_the_runs() -> None:
    assert _run(BARE, ()).tpu_args_in_force == ()
    run = _run(SET, ("--xla_tpu_scoped_vmem_limit_kib=4096",))
    # collect's own Mosaic dump flag and jax's are left out; the user's stays.
    assert run.tpu_args_in_force == ("--xla_tpu_scoped_vmem_limit_kib=4096",)


def test_the_flag_jax_adds_stays_when_the_user_set_it() -> None:
    flag = "--xla_tpu_use_enhanced_launch_barrier=true"
    assert _run(" " + flag, (flag,)).tpu_args_in_force == (flag,)


def test_a_flag_the_program_set_itself_is_kept() -> None:
    value = "--xla_tpu_enable_latency_hiding_scheduler=true" + BARE
    assert _run(value, ()).tpu_args_in_force == ("--xla_tpu_enable_latency_hiding_scheduler=true",)
