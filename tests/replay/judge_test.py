"""Replay of real dumps: small real jax programs run with dumps on, then replayed.

Each program runs once per module (module-scoped fixtures); every replay is a real child.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.dumps import FAST_MATH, Dumped, dump
from xla_bugkit import proc
from xla_bugkit.failure.classify import Kind, Phase, classify
from xla_bugkit.hlo.hlo_proto import HloProto
from xla_bugkit.replay import protocol
from xla_bugkit.replay.children import Spares
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.judge_result import judge_result
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.replay.spawn import Child
from xla_bugkit.verdict import Outcome, Verdict
from xla_bugkit.verdict.tolerance import Tolerance


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Dumped]:
    root = tmp_path_factory.mktemp("programs")
    runs: dict[str, tuple[tuple[str, ...], float]] = {
        # Compiles a loop that never ends and stops before running it.
        "compiled_hang": ((), 120),
        "normal": ((), 60),
        "crash": (("--xla_disable_all_hlo_passes=true",), 60),
        "split": (("--xla_cpu_parallel_codegen_split_count=0",), 60),
        "oom": ((), 60),
        "callback": ((), 60),
        "nan": (FAST_MATH, 60),
        "pmap": (("--xla_force_host_platform_device_count=2",), 60),
        "sharded": (("--xla_force_host_platform_device_count=2",), 60),
        # tests/programs/wrong_result.py (jax#39103); last: it is the heaviest run.
        "wrong_result": ((), 120),
    }
    # Each is its own process; running them side by side keeps the suite fast.
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {
            name: pool.submit(dump, root, name, flags, timeout)
            for name, (flags, timeout) in runs.items()
        }
        return {name: future.result() for name, future in futures.items()}


def test_normal_function_is_not_reproduced_and_matches_its_snapshot(
    dumps: dict[str, Dumped],
) -> None:
    normal = dumps["normal"]
    assert normal.failure.kind is Kind.SUCCESS
    verdict = replay(normal.module("jit_f"), expected=None)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.inputs == "snapshot"
    assert verdict.matches_recorded is True
    assert verdict.evidence.startswith("ran to completion; result agrees with op-by-op")
    assert verdict.numbers["reference"] == "op-by-op, conservative flags"
    assert not verdict.reproduced


def test_generated_inputs_say_so(dumps: dict[str, Dumped]) -> None:
    verdict = replay(
        dumps["normal"].module("jit_f"),
        expected=None,
        options=ReplayOptions(use_data=False, seed=7),
    )
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.inputs == "generated (seed 7)"
    assert verdict.matches_recorded is None


def test_compile_crash_reproduces_with_its_site(dumps: dict[str, Dumped]) -> None:
    crash = dumps["crash"]
    assert crash.failure.kind is Kind.COMPILE_CRASH
    assert crash.failure.site == "buffer_assignment_util.cc:46"
    verdict = replay(crash.module("jit__lambda"), expected=crash.failure)
    assert verdict.outcome is Outcome.REPRODUCED_CRASH, verdict.evidence
    assert verdict.failure is not None and verdict.failure.signal == "SIGABRT"
    assert verdict.failure.site == "buffer_assignment_util.cc:46"
    assert "Check failed: const_instr == nullptr" in verdict.evidence


def test_a_crash_whose_message_was_lost_reproduces_by_how_it_died(
    dumps: dict[str, Dumped],
) -> None:
    # The run only showed the signal (pytest's capture took XLA's line); the process was
    # compiling: a replay that dies on the same signal while compiling reproduces it.
    crash = dumps["crash"]
    lost = replace(
        crash.failure,
        headline="killed by SIGABRT",
        signature="killed by SIGABRT",
        site=None,
        message_lost=True,
    )
    verdict = replay(
        crash.module("jit__lambda"), expected=lost, options=ReplayOptions(reference=False)
    )
    assert verdict.outcome is Outcome.REPRODUCED_CRASH, verdict.evidence
    assert verdict.evidence.startswith(
        "the run's message was not captured; the replay's: compile crash (SIGABRT): "
        "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr"
    )
    # Dying another way is another failure.
    segv = replace(
        lost, headline="killed by SIGSEGV", signature="killed by SIGSEGV", signal="SIGSEGV"
    )
    other = replay(
        crash.module("jit__lambda"), expected=segv, options=ReplayOptions(reference=False)
    )
    assert other.outcome is Outcome.NOT_REPRODUCED, other.evidence


def test_an_interpreter_that_cannot_run_the_replay_leaves_it_to_ours(
    dumps: dict[str, Dumped],
) -> None:
    # The base interpreter of this venv has no jax (nor xla-bugkit's dependencies): asked to
    # replay under it, as under a program's own, the replay runs here and says so.
    base = Path(sys.base_prefix) / "bin" / "python3"
    if not base.exists() or Path(sys.prefix) == Path(sys.base_prefix):
        pytest.skip("no base interpreter apart from this one")
    crash = dumps["crash"]
    inp = replace(crash.module("jit__lambda"), python=str(base))
    verdict = replay(inp, expected=crash.failure, options=ReplayOptions(reference=False))
    assert verdict.outcome is Outcome.REPRODUCED_CRASH, verdict.evidence
    assert verdict.under.startswith("jaxlib 0.")
    assert verdict.under.endswith(
        f"of xla-bugkit's (the program's interpreter {base} could not run it)"
    )


def test_compile_crash_needs_its_flags(dumps: dict[str, Dumped]) -> None:
    crash = dumps["crash"]
    inp = ReplayInput("jit__lambda", crash.module("jit__lambda").hlo)
    verdict = replay(inp, expected=crash.failure, options=ReplayOptions(reference=False))
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence


def test_compile_error_reproduces(dumps: dict[str, Dumped]) -> None:
    split = dumps["split"]
    assert split.failure.status_code == "INTERNAL"
    verdict = replay(split.module("jit__lambda"), expected=split.failure)
    assert verdict.outcome is Outcome.REPRODUCED_ERROR, verdict.evidence
    assert verdict.evidence.startswith("compile error: INTERNAL: Too many extra compilation parts")


def test_runtime_error_reproduces(dumps: dict[str, Dumped]) -> None:
    oom = dumps["oom"]
    assert oom.failure.status_code == "RESOURCE_EXHAUSTED"
    verdict = replay(oom.module("jit__lambda"), expected=oom.failure)
    assert verdict.outcome is Outcome.REPRODUCED_ERROR, verdict.evidence
    assert verdict.failure is not None and verdict.failure.kind is Kind.RUNTIME_ERROR
    assert "RESOURCE_EXHAUSTED: Out of memory allocating" in verdict.evidence


def test_hang_reproduces_when_a_hang_is_expected(dumps: dict[str, Dumped]) -> None:
    spin = dumps["compiled_hang"].module("jit_spin")
    expected = classify("", exit_status=None, timed_out=True)
    assert expected.kind is Kind.HANG
    # A replay that times out before it starts compiling (a loaded machine importing jax)
    # proves nothing and says so; a longer timeout then lets it reach the loop.
    for timeout in (10.0, 40.0, 160.0):
        verdict = replay(spin, expected=expected, options=ReplayOptions(timeout=timeout))
        if "did not start compiling" not in verdict.evidence:
            break
        assert verdict.outcome is Outcome.NOT_REPLAYABLE, verdict.evidence
    assert verdict.outcome is Outcome.REPRODUCED_HANG, verdict.evidence
    # The loop spins: the replay computed all along, which proves no hang by itself.
    running = f"no result after {timeout:g} s while running, computing all along ("
    assert verdict.evidence.startswith(running), verdict.evidence
    assert verdict.computing and not verdict.idle


def test_host_callback_is_not_replayable(dumps: dict[str, Dumped]) -> None:
    verdict = replay(dumps["callback"].module("jit__lambda"), expected=None)
    assert verdict.outcome is Outcome.NOT_REPLAYABLE
    assert "xla_ffi_python_cpu_callback" in verdict.evidence


def test_fast_math_nan_loss_is_a_wrong_result(dumps: dict[str, Dumped]) -> None:
    nan = dumps["nan"]
    assert nan.failure.kind is Kind.SUCCESS
    verdict = replay(nan.module("jit__lambda"), expected=None)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    # The replay reproduces the user's own (fast-math) result; op by op, isnan is honoured.
    assert verdict.matches_recorded is True
    assert verdict.numbers["reference"] == "op-by-op"
    assert verdict.numbers["mismatches"] == 2 and verdict.numbers["nans"] == 2
    assert verdict.numbers["first_indices"] == [[0, 1], [0, 4]]


def test_flags_an_override_cannot_take_go_by_xla_flags(dumps: dict[str, Dumped]) -> None:
    # XLA_FLAGS reads "1" as true; a per-compile override of a bool takes only a bool, so
    # XLA refuses these and the replay moves them to the child's XLA_FLAGS. The references
    # still compile under their own (conservative) overrides and catch the lost NaNs.
    flags = ("--xla_cpu_enable_fast_math=1", "--xla_cpu_fast_math_honor_nans=0")
    inp = replace(dumps["nan"].module("jit__lambda"), xla_flags=flags)
    verdict = replay(inp, expected=None)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert verdict.numbers["reference"] == "op-by-op"


def test_ynn_fusion_wrong_result_reproduces_against_op_by_op(dumps: dict[str, Dumped]) -> None:
    # jax#39103: XLA:CPU's YNN fusion puts another row's value at index 16384. The module
    # takes f64, so the replay must not canonicalise its arguments to f32 (it once failed
    # with "INVALID_ARGUMENT: E0102: RuntimeProgramInputMismatch").
    wrong = dumps["wrong_result"]
    assert wrong.failure.kind is Kind.WRONG_RESULT  # the program's own check exits 1
    inp = wrong.first_module("jit_f", "f64")
    verdict = replay(inp, expected=None)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert verdict.inputs == "snapshot"
    assert verdict.matches_recorded is True  # the user's wrong result, replayed
    assert verdict.numbers["reference"] == "op-by-op"
    assert verdict.numbers["elements"] == 16385
    mismatches = verdict.numbers["mismatches"]
    assert isinstance(mismatches, int) and mismatches >= 1
    first = verdict.numbers["first_indices"]
    assert isinstance(first, list) and first[0] == [0, 16384]

    # Without the YNN fusion the result is right, and the conservative-flags reference (which
    # turns the fusion off as well) agrees with it.
    no_ynn = replace(inp, xla_flags=("--xla_cpu_experimental_ynn_fusion_type=",))
    verdict = replay(no_ynn, expected=None)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.numbers["reference"] == "op-by-op, conservative flags"

    # The user's --rtol/--atol decide how far is too far: a bound above the error (another
    # row's value, off by under 1%) lets it pass; the verdict says at what bound it differed.
    loose = replay(replace(inp, tolerance=Tolerance(rtol=0.05, atol=0.0)), expected=None)
    assert loose.outcome is Outcome.NOT_REPRODUCED, loose.evidence
    strict = replay(replace(inp, tolerance=Tolerance(rtol=1e-6, atol=0.0)), expected=None)
    assert strict.outcome is Outcome.REPRODUCED_WRONG, strict.evidence
    assert strict.evidence.endswith("(at rtol 1e-06, atol 0)")


def test_op_by_op_agreement_outweighs_a_whole_module_reference(tmp_path: Path) -> None:
    # A whole-module reference can carry a miscompile of its own (jax#39103's YNN fusion did,
    # before the conservative flags turned it off); op by op, no fusion touches the result.
    right, wrong = np.arange(4.0), np.array([0.0, 1.0, 2.0, 9.0])
    for stem, array in (("test", right), ("opbyop", right), ("conservative", wrong)):
        protocol.save_arrays(tmp_path / f"{stem}.npz", [array])
    done = proc.Completed(0, "", False, 0.0)
    child = Child(done, tmp_path, Phase.RUN, "snapshot", None, tested=True)
    inp = ReplayInput("jit_f", tmp_path / "m.hlo.pb")
    verdict = judge_result(inp, child, None, 300)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.numbers["reference"] == "op-by-op"
    assert verdict.evidence.startswith(
        "ran to completion; result agrees with op-by-op (the conservative flags reference "
        "differs: 1/4 elements differ"
    )
    # Without the op-by-op reference, the conservative one alone still decides.
    (tmp_path / "opbyop.npz").unlink()
    (tmp_path / "opbyop.error").write_text("no op-by-op here")
    verdict = judge_result(inp, child, None, 300)
    assert verdict.outcome is Outcome.REPRODUCED_WRONG, verdict.evidence
    assert verdict.numbers["reference"] == "conservative flags"


def test_without_fast_math_the_same_module_is_fine(dumps: dict[str, Dumped]) -> None:
    inp = ReplayInput("jit__lambda", dumps["nan"].module("jit__lambda").hlo)
    verdict = replay(inp, expected=None)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence


def test_sharded_jit_replays_on_two_devices(dumps: dict[str, Dumped]) -> None:
    # A jit over a 2-device mesh: compiled from the PJRT folder on 2 forced CPU devices, each
    # argument split by its sharding, the result put back together. XLA writes no snapshot
    # for a multi-device execution, so the inputs are generated; both one-device references
    # (the unpartitioned module) agree with the partitioned result.
    sharded = dumps["sharded"]
    assert sharded.failure.kind is Kind.SUCCESS
    inp = sharded.with_pjrt("jit__lambda")
    assert inp.snapshot is None
    # Without the recorded device-count flag: the replay must ask for the devices itself.
    verdict = replay(replace(inp, xla_flags=()), expected=None)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.inputs == "generated (seed 42)"
    assert verdict.numbers["reference"] == "op-by-op, conservative flags"


def test_shard_map_is_checked_against_its_partitioned_conservative_reference(
    dumps: dict[str, Dumped],
) -> None:
    # pmap lowers to a Shardy manual computation: it runs partitioned from the PJRT folder.
    # Op by op has no one-device meaning for it, and the verdict says why; the conservative
    # reference compiles it partitioned too, and agrees.
    verdict = replay(dumps["pmap"].with_pjrt("jit__fun"), expected=None)
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence
    assert verdict.evidence.startswith("ran to completion; result agrees with conservative flags")
    assert "op-by-op: the module has a Shardy manual computation (custom-call xla.sdy." in (
        verdict.evidence
    )


def test_shardy_module_without_its_pjrt_folder_is_refused(dumps: dict[str, Dumped]) -> None:
    verdict = replay(dumps["pmap"].module("jit__fun"), expected=None)
    assert verdict.outcome is Outcome.NOT_REPLAYABLE
    assert verdict.evidence.startswith(
        "the module is partitioned with Shardy (custom-call xla.sdy."
    )
    assert verdict.evidence.endswith(
        "(module.mlir, compile_options.pb) replays that; it is missing"
    )


@pytest.mark.jax
def test_unloadable_hlo_is_not_replayable(tmp_path: Path) -> None:
    proto = HloProto()
    proto.hlo_module.name = "jit_broken"
    proto.hlo_module.computations.append(b"\x0a\x03abc\x1a\x02\xff\xff")
    path = tmp_path / "broken.hlo.pb"
    path.write_bytes(proto.SerializeToString())
    verdict = replay(ReplayInput("jit_broken", path), expected=None)
    assert verdict.outcome is Outcome.NOT_REPLAYABLE
    assert "cannot load the HLO" in verdict.evidence


def test_absent_platform_is_not_replayable(dumps: dict[str, Dumped]) -> None:
    inp = ReplayInput("jit_f", dumps["normal"].module("jit_f").hlo, platform="cuda")
    verdict = replay(inp, expected=None)
    assert verdict.outcome is Outcome.NOT_REPLAYABLE
    assert "'cuda' is not available" in verdict.evidence


def test_verdict_json_round_trip(dumps: dict[str, Dumped]) -> None:
    crash = dumps["crash"]
    verdict = Verdict(
        "jit__lambda",
        Outcome.REPRODUCED_CRASH,
        crash.failure.describe,
        "snapshot",
        crash.failure,
        {"max_abs": 1.0},
        True,
    )
    data = verdict.to_json()
    assert data["outcome"] == "reproduced: crash"
    assert data["failure"]["kind"] == "compile crash"
    assert Verdict.from_json(data) == verdict


def test_children_started_ahead_replay_as_a_child_started_for_the_module(
    dumps: dict[str, Dumped], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_cold_child(*args: object, **kwargs: object) -> proc.Completed:
        raise AssertionError("a child was started for the module: the spare went unused")

    monkeypatch.setattr(proc, "run_captured", no_cold_child)
    crash = dumps["crash"]
    with Spares() as spares:
        spares.start("cpu")
        spares.start("cpu")
        normal = replay(
            dumps["normal"].module("jit_f"), expected=None, options=ReplayOptions(spares=spares)
        )
        checked = ReplayOptions(reference=False, spares=spares)
        verdict = replay(crash.module("jit__lambda"), expected=crash.failure, options=checked)
        assert len(spares) == 0
    assert normal.outcome is Outcome.NOT_REPRODUCED, normal.evidence
    assert normal.inputs == "snapshot" and normal.matches_recorded is True
    assert normal.numbers["reference"] == "op-by-op, conservative flags"
    # The abort's own status reaches the verdict through a child that ran ahead.
    assert verdict.outcome is Outcome.REPRODUCED_CRASH, verdict.evidence
    assert verdict.failure is not None and verdict.failure.signal == "SIGABRT"
    assert verdict.failure.site == "buffer_assignment_util.cc:46"


def test_a_child_started_ahead_for_another_environment_is_not_used(
    dumps: dict[str, Dumped],
) -> None:
    # The module needs two devices, a flag XLA reads only at start-up: the spare (started
    # without it) is stopped, and the module gets a child of its own.
    inp = dumps["sharded"].with_pjrt("jit__lambda")
    with Spares() as spares:
        spares.start("cpu")
        verdict = replay(inp, expected=None, options=ReplayOptions(spares=spares))
        assert len(spares) == 0
    assert verdict.outcome is Outcome.NOT_REPRODUCED, verdict.evidence


def test_a_child_started_ahead_sets_the_modules_memory_limit_on_itself() -> None:
    code = (
        "import resource\n"
        "from xla_bugkit.replay.child import worker\n"
        "worker.limit_memory({'memory_limit': 1 << 40})\n"
        "print(resource.getrlimit(resource.RLIMIT_AS))\n"
    )
    done = proc.run_captured([sys.executable, "-c", code], timeout=120)
    assert done.output.strip() == f"({1 << 40}, {1 << 40})", done.output
