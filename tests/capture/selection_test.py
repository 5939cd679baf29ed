"""select: choose the modules that matter, on real dumps of the programs in tests/programs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ProgramRuns

from xla_bugkit.capture.dumps import DumpIndex, index
from xla_bugkit.capture.selection import Selection, is_helper, select
from xla_bugkit.failure import Failure, Kind, Phase, classify

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
    assert first.reasons[0] == "JAX was compiling jit(add_noise) when the run stopped"
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
        "JAX was compiling jit(train_step) when the run stopped"
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
    assert failure.kind is Kind.EXIT
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


def test_a_symbol_found_nowhere_adds_no_reason(program_runs: ProgramRuns) -> None:
    idx, failure, output = dumped(program_runs, "success")
    selection = select(idx, failure, output, symbol="no_such_op_anywhere")
    assert selection.guess


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
