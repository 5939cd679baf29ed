"""The run's own XLA flags as a cause (``collecting.own_flags``): the device count the program
gave itself is one of them, and the replay without them never applies a flag that makes XLA
read or write the user's files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, XLA_BUGKIT, clean_env, run_collect
from xla_bugkit.bundle.own_flags import DEVICES_SAID, OwnFlags, kept_flags
from xla_bugkit.verdict import Outcome, Verdict

DEVICES = "--xla_force_host_platform_device_count=8"
BREAKS = "--xla_disable_all_hlo_passes=true"


def _verdict(outcome: Outcome, **numbers: object) -> Verdict:
    return Verdict("module_0002.jit_body", outcome, "", "generated (seed 42)", numbers=numbers)


def test_the_replay_without_them_keeps_no_cache_of_the_users_and_drops_every_spelling() -> None:
    recorded = (
        DEVICES,
        "-xla_disable_all_hlo_passes=true",
        "--noxla_cpu_enable_fast_math",
        "--xla_gpu_per_fusion_autotune_cache_dir=/home/u/autotune",
        "--xla_gpu_kernel_cache_file=/home/u/kernels",
        "--xla_cpu_enable_fast_min_max=false",
    )
    # Everything a replay may apply, the caches withheld (flags.admit), canonical.
    assert kept_flags(recorded, set()) == (
        DEVICES,
        BREAKS,
        "--xla_cpu_enable_fast_math=false",
        "--xla_cpu_enable_fast_min_max=false",
    )
    dropped = {"--xla_disable_all_hlo_passes", "--xla_cpu_enable_fast_math", DEVICES[:-2]}
    assert kept_flags(recorded, dropped) == ("--xla_cpu_enable_fast_min_max=false",)


def test_the_device_count_is_named_with_what_a_replay_without_it_still_has() -> None:
    compiles = OwnFlags((DEVICES, BREAKS), _verdict(Outcome.NOT_REPRODUCED), alone=BREAKS)
    assert compiles.finding() == (
        f"this run set its own XLA flags ({DEVICES} {BREAKS}); without them {DEVICES_SAID} the "
        f"module compiles and runs, and with {BREAKS} alone it fails the same way: say so in "
        "the report (a crash or an error is XLA's bug under any flags)"
    )
    fails = OwnFlags((DEVICES,), _verdict(Outcome.REPRODUCED_CRASH))
    assert fails.finding() == (
        f"this run set its own XLA flags ({DEVICES}); it fails without them {DEVICES_SAID} too"
    )


def test_the_device_count_does_not_stop_fast_math_from_explaining_a_wrong_value() -> None:
    fast = "--xla_cpu_enable_fast_math=true"
    agreed = _verdict(Outcome.NOT_REPRODUCED, reference="op-by-op, conservative flags")
    own = OwnFlags((DEVICES, fast), agreed, wrong_result=True)
    assert own.relaxing == (fast,)


@pytest.mark.slow
@pytest.mark.jax
def test_a_device_count_the_program_set_itself_is_named_and_replayed(tmp_path: Path) -> None:
    program = PROGRAMS / "own_device_count.py"
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(program)])
    assert c.returncode == 0, c.stderr
    manifest = c.manifest()
    assert manifest["xla_flags"] == [DEVICES, BREAKS]
    said = (
        f"this run set its own XLA flags ({DEVICES} {BREAKS}); without them {DEVICES_SAID} "
        f"the module compiles and runs, and with {BREAKS} alone it fails the same way"
    )
    assert f"  first: {said}" in c.stderr
    assert f"**First:** {said}" in c.text("ISSUE.md")
    assert "replay module_0002.jit_body: reproduced: crash" in c.stderr
    # The maintainer's replay gives the module the program's 8 devices and its flag.
    verified = subprocess.run(
        [XLA_BUGKIT, "verify", str(c.bundle)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=READY_TIMEOUT,
    )
    assert verified.returncode == 0, verified.stderr
    assert f"the reporter's XLA flags, applied to each replay: {DEVICES} {BREAKS}" in (
        verified.stdout
    )
    assert "module_0002.jit_body: reproduced: crash" in verified.stdout
