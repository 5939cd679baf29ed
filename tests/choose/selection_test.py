"""select: choose the modules that matter, on real dumps of the programs in tests/programs."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, ProgramRuns, clean_env, run_collect
from xla_bugkit import proc
from xla_bugkit.choose.dumps import DumpIndex, DumpModule, index, is_helper
from xla_bugkit.choose.selection import Selection, select
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure import xla_log
from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.run import rerun
from xla_bugkit.run.evidence import Event, ProcessEvidence
from xla_bugkit.run.evidence_files import load

UNFINISHED = (
    "before-optimizations files but no after-optimizations files: its compilation did not finish"
)
NEWEST_SNAPSHOT = "the last execution to start before the failure (newest snapshot)"


def dumped(program_runs: ProgramRuns, name: str) -> tuple[DumpIndex, Failure, str]:
    run = program_runs[name]
    done = run.completed
    failure = classify(done.output, exit_status=done.returncode, timed_out=done.timed_out)
    return index(run.dump_dir), failure, done.output


def labels(selection: Selection) -> list[str]:
    return [c.module.label for c in selection.chosen]


def assert_others_complete(idx: DumpIndex, selection: Selection) -> None:
    chosen = set(labels(selection))
    assert len(chosen) == len(selection.chosen)
    assert chosen.isdisjoint(selection.others)
    assert sorted(chosen | set(selection.others)) == sorted(m.label for m in idx.modules)
    assert list(selection.others) == [m.label for m in idx.modules if m.label not in chosen]


def test_a_log_line_of_another_process_names_none_of_the_failing_ones_modules(
    program_runs: ProgramRuns,
) -> None:
    """A parent's XLA log in the run's output, its worker's dumps in the index: the two
    number their modules from 0 alike, and only the name tells them apart."""
    idx, failure, output = dumped(program_runs, "compile_crash")
    crashed = next(m for m in idx.modules if m.name == "jit_add_noise")
    parents = output.replace(f"{crashed.label}.", f"module_{crashed.id:04d}.jit_plan_shards.")
    assert parents != output
    first = select(idx, failure, parents).chosen[0]
    assert first.module.name == "jit_add_noise"  # JAX's compile log still names it
    assert not any(r.startswith("XLA's log") for r in first.reasons), first.reasons


def test_compile_crash_chooses_the_function_jax_was_compiling(
    program_runs: ProgramRuns,
) -> None:
    idx, failure, output = dumped(program_runs, "compile_crash")
    assert {m.name for m in idx.modules} >= {
        "jit_convert_element_type",
        "jit_broadcast_in_dim",
        "jit_add_noise",
    }
    selection = select(idx, failure, output)
    assert not selection.guess
    first = selection.chosen[0]
    assert first.module.name == "jit_add_noise"
    # XLA's log names the module by number; JAX's compile log only by name.
    assert first.reasons == (
        f"XLA's log: {first.module.label}.debug_options was the last file dumped before its "
        "first fatal line (buffer_assignment_util.cc:46)",
        "JAX was compiling jit(add_noise) when the run stopped",
    )
    # The helpers compiled before it have no evidence and are not chosen.
    assert labels(selection) == [first.module.label]
    assert set(selection.others) == {m.label for m in idx.modules if m.name != "jit_add_noise"}
    assert_others_complete(idx, selection)


def test_runtime_error_chooses_the_newest_snapshot(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "runtime_error")
    selection = select(idx, failure, output)
    assert not selection.guess
    first = selection.chosen[0]
    assert first.module.name == "jit_make_buffer"
    assert NEWEST_SNAPSHOT in first.reasons
    assert_others_complete(idx, selection)


def test_compile_error_chooses_train_step(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "compile_error")
    selection = select(idx, failure, output)
    assert not selection.guess
    assert [c.module.name for c in selection.chosen] == ["jit_train_step"]
    assert selection.chosen[0].reasons[0] == (
        "JAX was compiling jit(train_step) when XLA raised the error"
    )
    assert selection.others == ()


def test_helpers_are_never_chosen_over_user_functions(program_runs: ProgramRuns) -> None:
    for name in ("compile_crash", "runtime_error", "compile_error", "success"):
        idx, failure, output = dumped(program_runs, name)
        for limit in (1, 3, 10):
            chosen = select(idx, failure, output, limit=limit).chosen
            assert chosen and not is_helper(chosen[0].module), (name, limit)
            user_at = [i for i, c in enumerate(chosen) if not is_helper(c.module)]
            helper_at = [i for i, c in enumerate(chosen) if is_helper(c.module)]
            assert all(h > u for h in helper_at for u in user_at), (name, limit)


@pytest.mark.parametrize("name", ["jit_reduce_sum", "jit_equal", "jit_stage"])
def test_eager_primitive_modules_are_helpers(program_runs: ProgramRuns, name: str) -> None:
    idx, _, _ = dumped(program_runs, "wrong_result")
    (module, *_) = [m for m in idx.modules if m.name == name]
    assert is_helper(module)


def test_wrong_result_chooses_the_jitted_function(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "wrong_result")
    assert failure.kind.is_failure
    selection = select(idx, failure, output)
    assert selection.chosen[0].module.name == "jit_f", labels(selection)


def test_module_re_can_name_a_helper(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "compile_crash")
    selection = select(idx, failure, output, module_re="convert_element_type")
    first = selection.chosen[0]
    assert first.module.name == "jit_convert_element_type"
    assert first.reasons == ("matches --module 'convert_element_type'",)
    assert first.score == 100
    # What the user chose is what they get: the crash evidence only ranks.
    assert labels(selection) == [first.module.label]
    assert_others_complete(idx, selection)


def test_module_re_matches_the_label(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "compile_crash")
    selection = select(idx, failure, output, module_re=r"^module_0002\.")
    assert selection.chosen[0].module.label == "module_0002.jit_broadcast_in_dim"
    assert selection.chosen[0].reasons == ("matches --module '^module_0002\\\\.'",)


def test_symbol_finds_an_op_in_the_text_dumps(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "compile_crash")
    selection = select(idx, failure, output, symbol="shift_right_logical")
    first = selection.chosen[0]
    assert first.module.name == "jit_add_noise"
    assert first.reasons[0] == (
        f"{first.module.label}.before_optimizations.txt contains 'shift_right_logical'"
    )
    assert "JAX was compiling jit(add_noise) when the run stopped" in first.reasons


def test_symbol_on_a_successful_run(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "success")
    selection = select(idx, failure, output, symbol="tanh")
    assert not selection.guess
    (only,) = selection.chosen
    assert only.module.name == "jit_train_step"
    assert only.reasons == (f"{only.module.label}.before_optimizations.txt contains 'tanh'",)


def test_no_failure_falls_back_to_a_guess(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "success")
    assert failure.kind is Kind.SUCCESS
    selection = select(idx, failure, output)
    assert selection.guess
    (only,) = selection.chosen
    assert only.module.name == "jit_train_step"
    assert only.reasons == ("no failure seen: the last function compiled (choose with --module)",)
    assert_others_complete(idx, selection)


def test_a_failure_without_evidence_guesses_the_last_user_function(
    program_runs: ProgramRuns,
) -> None:
    idx, _, _ = dumped(program_runs, "compile_crash")
    failure = Failure(Kind.EXIT, Phase.COMPILE, "boom", "boom", exit_status=1)
    selection = select(idx, failure, "boom\n")
    assert selection.guess
    (only,) = selection.chosen
    assert only.module.name == "jit_add_noise"
    assert only.reasons == ("a guess: the last module compiled before the failure",)
    assert_others_complete(idx, selection)


# --- synthetic dumps for the unfinished-compile rule ---------------------------------------


def unfinished_dump(root: Path) -> DumpIndex:
    names = [
        "module_0000.jit_convert_element_type.before_optimizations.txt",
        "module_0000.jit_convert_element_type.cpu_after_optimizations.txt",
        "module_0002.jit_train_step.before_optimizations.txt",
        "module_0002.jit_train_step.before_optimizations.hlo.pb",
        "module_0002.jit_train_step.cpu_after_optimizations.txt",
        "module_0004.jit_loss.before_optimizations.txt",
        "module_0004.jit_loss.before_optimizations.hlo.pb",
        "module_0006.jit_eval.cpu_after_optimizations.txt",
    ]
    for name in names:
        (root / name).write_bytes(b"")
    return index(root)


def test_unfinished_compile_is_chosen_for_a_compile_crash(tmp_path: Path) -> None:
    idx = unfinished_dump(tmp_path)
    output = "F0101 00:00:00.000000 1 foo.cc:1] Check failed: x\n"
    failure = classify(output, exit_status=-6)
    assert failure.kind is Kind.CRASH and failure.compiling is None
    crash = Failure(Kind.COMPILE_CRASH, Phase.COMPILE, failure.headline, failure.signature)
    for f in (failure, crash):
        selection = select(idx, f, output)
        assert not selection.guess
        assert labels(selection) == ["module_0004.jit_loss"]
        assert selection.chosen[0].reasons == (UNFINISHED,)
        assert_others_complete(idx, selection)


def test_unfinished_compile_is_no_evidence_for_a_runtime_error(tmp_path: Path) -> None:
    idx = unfinished_dump(tmp_path)
    output = "jax.errors.JaxRuntimeError: INTERNAL: boom\n"
    failure = Failure(Kind.RUNTIME_ERROR, Phase.RUN, "INTERNAL: boom", "INTERNAL: boom")
    selection = select(idx, failure, output)
    assert selection.guess
    assert labels(selection) == ["module_0006.jit_eval"]


def test_a_module_named_in_the_failure(tmp_path: Path) -> None:
    idx = unfinished_dump(tmp_path)
    output = (
        "Compiling jit(eval) with global shapes\n"
        "Finished XLA compilation of jit(eval) in 0.1 sec\n"
        "Traceback (most recent call last):\n"
        "jax.errors.JaxRuntimeError: INTERNAL: in jit_train_step: boom\n"
    )
    failure = classify(output, exit_status=1, phase=Phase.RUN)
    selection = select(idx, failure, output)
    assert labels(selection)[0] == "module_0002.jit_train_step"
    assert selection.chosen[0].reasons == ("named in the failure's output",)
    assert labels(selection) == ["module_0002.jit_train_step"]


def test_a_dump_line_cut_by_the_failures_window_names_no_module(tmp_path: Path) -> None:
    # The failure's text starts 2000 characters before its headline: mid-way through one of
    # XLA's "Dumping" lines, whose start (what marks it as one) is left outside.
    idx = unfinished_dump(tmp_path)
    dumping = (
        "I1205 08:36:57.162949    2389 dump.cc:233] Dumping module_0004.jit_loss."
        "multiply_add_fusion_kernel_module.ir-no-opt.ll to /tmp/work/dump\n"
    )
    headline = "kinetic energy mismatch at step 1: particle 32768: 1065369600.0 vs 1.0"
    for shift in range(len(dumping)):  # wherever the cut falls
        output = dumping * 40 + f"step 1: total KE 1.17e+13{' ' * shift}\n{headline}\n"
        failure = Failure(Kind.WRONG_RESULT, Phase.UNKNOWN, headline, headline, exit_status=1)
        reasons = [c.reasons for c in select(idx, failure, output).chosen]
        assert all("named in the failure's output" not in r for r in reasons), shift


# --- a training loop: 30-odd modules, six same-name siblings, one fails ---------------------

LOOP = PROGRAMS / "training_loop_oom.py"


@dataclass(frozen=True)
class LoopRun:
    index: DumpIndex
    failure: Failure
    output: str


def run_loop(root: Path, *args: str) -> LoopRun:
    dump_dir = root / "dump"
    env, _ = rerun.child_env(clean_env(), dump_dir)
    done = proc.run([sys.executable, str(LOOP), *args], env=env, cwd=root, timeout=READY_TIMEOUT)
    failure = classify(done.output, exit_status=done.returncode, timed_out=done.timed_out)
    return LoopRun(index(dump_dir), failure, done.output)


@pytest.fixture(scope="module")
def loop_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoopRun]:
    root = tmp_path_factory.mktemp("training_loop")
    (root / "plain").mkdir()
    (root / "checkpoint").mkdir()
    return {
        "plain": run_loop(root / "plain"),
        "checkpoint": run_loop(root / "checkpoint", "--checkpoint-on-error"),
    }


def culprit(idx: DumpIndex) -> DumpModule:
    """The third of the six ``jit__lambda`` modules: the metrics are compiled in order."""
    siblings = [m for m in idx.modules if m.name == "jit__lambda"]
    assert len(siblings) == 6, [m.label for m in idx.modules]
    return siblings[2]


ALLOCATED = (
    "its buffer assignment holds the 4,398,046,511,104 bytes XLA could not allocate "
    "(allocation 0, output shape is |f32[1048576,1048576]|, maybe-live-out)"
)


@pytest.mark.parametrize("variant", ["plain", "checkpoint"])
def test_the_failing_sibling_is_chosen_among_30_modules(
    loop_runs: dict[str, LoopRun], variant: str
) -> None:
    run = loop_runs[variant]
    assert run.failure.kind is Kind.RUNTIME_ERROR, run.output[-3000:]
    assert "Out of memory allocating 4398046511104 bytes" in run.failure.headline
    assert len(run.index.modules) >= 28
    bad = culprit(run.index)
    # In the middle: user functions were compiled after it, and run after it.
    assert bad.id < max(m.id for m in run.index.modules if not is_helper(m))
    selection = select(run.index, run.failure, run.output)
    first = selection.chosen[0]
    assert first.module.label == bad.label, labels(selection)
    (allocated, log_reason, *rest) = first.reasons
    assert allocated == ALLOCATED
    assert log_reason.startswith(f"XLA's log: {bad.label}.snapshot.")
    assert log_reason.endswith("was the last file dumped before its first error line "
                               "(cpu_client.cc:1923)")  # fmt: skip
    assert rest == ([NEWEST_SNAPSHOT] if variant == "plain" else [])


def test_without_xla_log_lines_the_failed_allocation_still_names_the_culprit(
    loop_runs: dict[str, LoopRun],
) -> None:
    """Without the log lines, the newest snapshot is the checkpoint's; the size XLA could not
    allocate is in the culprit's buffer assignment alone (not in a sibling's, nor in a
    module given the value as a parameter)."""
    run = loop_runs["checkpoint"]
    quiet = xla_log.without_dump_lines(run.output)
    selection = select(run.index, run.failure, quiet)
    assert selection.chosen[0].module.label == culprit(run.index).label
    assert selection.chosen[0].reasons == (ALLOCATED,)
    assert selection.chosen[1].module.name == "jit_checksum"
    assert selection.chosen[1].reasons == (NEWEST_SNAPSHOT,)


# --- evidence the processes recorded about themselves ---------------------------------------


def siblings_dump(root: Path) -> DumpIndex:
    """Six ``jit__lambda`` modules compiled for the same shapes, the last still compiling."""
    for i in range(6):
        label = f"module_{10 + 2 * i:04d}.jit__lambda"
        (root / f"{label}.before_optimizations.txt").write_bytes(b"")
        if i < 5:
            (root / f"{label}.cpu_after_optimizations.txt").write_bytes(b"")
            snapshot(root / f"{label}.snapshot.{i}.pb", 1000 + i)
    (root / "module_0030.jit_checksum.cpu_after_optimizations.txt").write_bytes(b"")
    snapshot(root / "module_0030.jit_checksum.snapshot.9.pb", 2000)
    return index(root)


def snapshot(path: Path, mtime: float) -> None:
    """An empty snapshot written at ``mtime``: files written in one go may share a time."""
    path.write_bytes(b"")
    os.utime(path, (mtime, mtime))


def process(*events: Event, pid: int = 7, rank: int | None = None) -> ProcessEvidence:
    return ProcessEvidence(pid=pid, ppid=1, argv=("python", "train.py"), events=events, rank=rank)


def compile_event(n: int, mid: int | None, *, ended: bool = True) -> Event:
    return Event("compile", n, "jit__lambda", mid, "jit(<lambda>)", "f32[32,64]", 1.0 + n,
                 2.0 + n if ended else None)  # fmt: skip


def execute_event(n: int, mid: int, module: str = "jit__lambda", *, ended: bool = True) -> Event:
    return Event("execute", n, module, mid, started=10.0 + n, ended=11.0 + n if ended else None)


RUNTIME = Failure(Kind.RUNTIME_ERROR, Phase.RUN, "INTERNAL: boom", "INTERNAL: boom")


def test_the_execution_under_way_wins_over_the_newest_snapshot(tmp_path: Path) -> None:
    idx = siblings_dump(tmp_path)
    evidence = [process(*(execute_event(i, 10 + 2 * i) for i in range(5)),
                        execute_event(5, 14, ended=False), execute_event(6, 30))]  # fmt: skip
    selection = select(idx, RUNTIME, "", evidence=evidence)
    assert labels(selection)[:2] == ["module_0014.jit__lambda", "module_0030.jit_checksum"]
    assert selection.chosen[0].reasons == ("XLA was executing it (jit__lambda) when the process "
                                           "stopped",)  # fmt: skip


def test_a_compilation_under_way_without_a_number_is_the_unfinished_sibling(
    tmp_path: Path,
) -> None:
    idx = siblings_dump(tmp_path)
    evidence = [process(*(compile_event(i, 10 + 2 * i) for i in range(5)),
                        compile_event(5, None, ended=False))]  # fmt: skip
    crash = Failure(Kind.CRASH, Phase.COMPILE, "Check failed: x", "Check failed: x")
    selection = select(idx, crash, "", evidence=evidence)
    first = selection.chosen[0]
    assert first.module.label == "module_0020.jit__lambda"
    assert first.reasons == (
        "XLA was compiling it (jit(<lambda>) on f32[32,64]) when the process stopped",
        UNFINISHED,
    )


def test_a_crash_while_compiling_also_suspects_the_execution_still_on_the_device(
    tmp_path: Path,
) -> None:
    """jax dispatched jit_checksum and went on to compile the next function; the process died
    on a signal before the checksum's outputs were ready: either may have crashed, and both are
    replayed."""
    idx = siblings_dump(tmp_path)
    running = replace(execute_event(0, 30, "jit_checksum", ended=False), on_device=True)
    evidence = [process(running, compile_event(1, 20, ended=False))]
    crash = Failure(Kind.CRASH, Phase.COMPILE, "killed by SIGSEGV", "killed by SIGSEGV")
    selection = select(idx, crash, "", evidence=evidence)
    assert labels(selection)[:2] == ["module_0020.jit__lambda", "module_0030.jit_checksum"]
    assert selection.chosen[1].reasons[0] == (
        "XLA was still running it (jit_checksum) on the device when the process died"
    )


def test_the_last_finished_execution_before_a_runtime_failure(tmp_path: Path) -> None:
    idx = siblings_dump(tmp_path)
    evidence = [process(execute_event(0, 12), execute_event(1, 16),
                        execute_event(2, 0, "jit_convert_element_type"))]  # fmt: skip
    selection = select(idx, RUNTIME, "", evidence=evidence)
    assert labels(selection)[0] == "module_0016.jit__lambda"
    assert selection.chosen[0].reasons == ("the last execution dispatched before the process "
                                           "failed (it may still have run)",)  # fmt: skip


def test_several_processes_are_named_and_a_rank_that_ended_well_is_not_evidence(
    tmp_path: Path,
) -> None:
    idx = siblings_dump(tmp_path)
    healthy = replace(process(execute_event(0, 30), pid=8, rank=1), exited=True)
    failing = process(execute_event(0, 12), execute_event(1, 18, ended=False), pid=9, rank=0)
    selection = select(idx, RUNTIME, "", evidence=[healthy, failing])
    assert labels(selection)[0] == "module_0018.jit__lambda"
    assert selection.chosen[0].reasons[0] == (
        "XLA was executing it (jit__lambda) when process 9 (rank 0) stopped"
    )
    assert all("process 8" not in r for c in selection.chosen for r in c.reasons)


def test_evidence_counts_only_for_a_failure(tmp_path: Path) -> None:
    idx = siblings_dump(tmp_path)
    success = classify("ok\n", exit_status=0)
    evidence = [process(execute_event(0, 12, ended=False))]
    assert select(idx, success, "", evidence=evidence).guess


def test_an_execution_that_raised_wins_over_what_ran_after_it(tmp_path: Path) -> None:
    idx = siblings_dump(tmp_path)
    oom = "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes."
    raised = replace(execute_event(1, 14), error=oom)
    evidence = [process(execute_event(0, 12), raised, execute_event(2, 30))]
    selection = select(idx, RUNTIME, "", evidence=evidence)
    assert labels(selection)[:2] == ["module_0014.jit__lambda", "module_0030.jit_checksum"]
    assert selection.chosen[0].reasons == (f"XLA raised {oom} while executing it (jit__lambda)",)


def test_an_error_raised_again_and_again_names_the_earlier_modules(tmp_path: Path) -> None:
    """A program that catches each error and goes on (one metric after another): the last
    module that raised is chosen, and its reason says it was not the only one."""
    idx = siblings_dump(tmp_path)
    unimplemented = "JaxRuntimeError: UNIMPLEMENTED: TopK is not yet supported"
    events = [replace(execute_event(i, 10 + 2 * i), error=unimplemented) for i in range(3)]
    selection = select(idx, RUNTIME, "", evidence=[process(*events, execute_event(3, 30))])
    assert selection.chosen[0].module.label == "module_0014.jit__lambda"
    assert selection.chosen[0].reasons[0] == (
        f"XLA raised {unimplemented} while executing it (jit__lambda); it raised the same "
        "before, in module_0010.jit__lambda, module_0012.jit__lambda"
    )


# --- the same loop under collect, with the start-up hook recording each process ------------


def hook_missing() -> bool:
    return importlib.util.find_spec("xla_bugkit.run.hook") is None


@pytest.mark.slow
@pytest.mark.skipif(hook_missing(), reason="xla_bugkit.run.hook (the start-up hook) is missing")
def test_the_hook_names_the_sibling_that_raised(tmp_path: Path) -> None:
    """The user silenced XLA's INFO lines and the program checkpoints after the error: only
    what the process recorded about itself points at the culprit among its siblings."""
    work = tmp_path / "work"
    argv = [sys.executable, str(LOOP), "--checkpoint-on-error", "--metrics-of-norms"]
    done = run_collect(tmp_path / "loop.zip", argv, "--keep-workdir", "--workdir", str(work),
                       env={"TF_CPP_MIN_LOG_LEVEL": "2"})  # fmt: skip
    if not any(e.error for p in load(work) for e in p.events):
        pytest.skip("XLA ran the failing computation asynchronously here: no call raised")
    # Reproduced; 4 TiB is more than the machine has: not XLA's bug, so 3.
    assert done.returncode == 3, done.stderr
    m = done.manifest()
    assert m["blame"]["whose"] == "not xla"
    assert m["failure"]["kind"] == "runtime error"
    first = m["modules"][0]
    assert first["name"] == "jit__lambda"
    before = done.text(f"modules/{first['label']}/{first['label']}.before_optimizations.txt")
    assert "f32[1048576,1048576]" in before  # the activation map, not a sibling
    assert first["reasons"][0] == ALLOCATED
    assert first["reasons"][1].startswith(
        "XLA raised JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating"
    )
    assert first["replay"]["outcome"] == "reproduced: error"


def test_a_choice_that_matches_nothing_is_said(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "compile_crash")
    with pytest.raises(BugkitError) as raised:
        select(idx, failure, output, module_re="jit_no_such_function")
    message = str(raised.value)
    assert message.startswith(
        f"--module 'jit_no_such_function' matches none of the run's {len(idx.modules)} modules ("
    )
    assert idx.modules[-1].label in message
    with pytest.raises(BugkitError, match="--symbol 'no-such-op' is in none of the run's"):
        select(idx, failure, output, symbol="no-such-op")


def test_of_modules_with_equally_strong_evidence_the_one_more_evidence_points_at_leads() -> None:
    from xla_bugkit.choose import selection
    from xla_bugkit.choose.dumps import DumpIndex, DumpModule

    # Both plan the allocation XLA could not make (the second was given the first's broken
    # result); only the first was also the last execution before the failure.
    index = DumpIndex(
        Path("/d"), (DumpModule(46, "jit_pairwise", ()), DumpModule(48, "jit_sort", ())), ()
    )
    reasons = {
        "module_0046.jit_pairwise": [(95, "plans the allocation"), (55, "the last execution")],
        "module_0048.jit_sort": [(95, "plans the allocation")],
    }
    failure = Failure(Kind.RUNTIME_ERROR, Phase.RUN, "x", "x")
    ranked = selection._rank(index, failure, reasons, 3)
    assert [c.module.name for c in ranked.chosen] == ["jit_pairwise", "jit_sort"]
