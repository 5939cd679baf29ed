"""signature: classify the real output of real failing programs (tests/programs), run once each."""

from __future__ import annotations

import json

import pytest
from conftest import ProgramRun, ProgramRuns

from xla_bugkit.failure import Failure, Kind, Phase, classify, compile_open, normalise

CHECK_SIGNATURE = "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr"


def classified(run: ProgramRun) -> Failure:
    done = run.completed
    return classify(
        done.output,
        exit_status=done.returncode,
        timed_out=done.timed_out,
        interrupted=done.interrupted,
    )


# --- real programs -------------------------------------------------------------------------


def test_compile_crash_is_a_sigabrt_check_while_compiling(program_runs: ProgramRuns) -> None:
    run = program_runs["compile_crash"]
    failure = classified(run)
    assert run.completed.returncode == -6
    assert failure.kind is Kind.COMPILE_CRASH
    assert failure.phase is Phase.COMPILE
    assert failure.exit_status == -6
    assert failure.signal == "SIGABRT"
    assert failure.site == "buffer_assignment_util.cc:46"
    assert failure.status_code is None
    assert failure.exception is None
    assert failure.compiling == "add_noise"
    assert failure.headline.startswith(CHECK_SIGNATURE)
    assert failure.signature == CHECK_SIGNATURE
    assert failure.describe.startswith(f"compile crash (SIGABRT): {CHECK_SIGNATURE}")
    assert len(failure.describe) <= len("compile crash (SIGABRT): ") + 160


def test_compile_crash_signature_is_stable_across_runs(program_runs: ProgramRuns) -> None:
    first = classified(program_runs["compile_crash"])
    second = classified(program_runs["compile_crash_again"])
    # The CHECK prints a heap address and the instruction it choked on; neither may count.
    assert "0x" in first.headline
    assert first.signature == second.signature == CHECK_SIGNATURE
    assert "0x" not in first.signature and "%constant" not in first.signature
    assert first.same_bug(second) and second.same_bug(first)


def test_compile_error_is_an_internal_status_from_the_compiler(program_runs: ProgramRuns) -> None:
    run = program_runs["compile_error"]
    failure = classified(run)
    assert run.completed.returncode == 1
    assert failure.kind is Kind.COMPILE_ERROR
    assert failure.phase is Phase.COMPILE
    assert failure.signal is None
    assert failure.status_code == "INTERNAL"
    assert failure.exception == "jax.errors.JaxRuntimeError"
    assert failure.site is None
    assert failure.headline.startswith("INTERNAL: Too many extra compilation parts")
    assert failure.signature.startswith("INTERNAL: Too many extra compilation parts")
    # JAX logs "Finished XLA compilation" even for a compilation that raised.
    assert "Finished XLA compilation of jit(train_step)" in run.output
    assert compile_open(run.output) is None
    assert failure.compiling == "train_step"


def test_runtime_error_is_resource_exhausted_while_running(program_runs: ProgramRuns) -> None:
    run = program_runs["runtime_error"]
    failure = classified(run)
    assert run.completed.returncode == 1
    assert failure.kind is Kind.RUNTIME_ERROR
    assert failure.phase is Phase.RUN
    assert failure.signal is None
    assert failure.status_code == "RESOURCE_EXHAUSTED"
    assert failure.exception == "jax.errors.JaxRuntimeError"
    assert failure.site is None
    assert failure.compiling is None
    assert failure.headline == "RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes."
    assert failure.signature == "RESOURCE_EXHAUSTED: Out of memory allocating N bytes."


def test_hang_is_killed_after_the_timeout(program_runs: ProgramRuns) -> None:
    run = program_runs["hang"]
    failure = classified(run)
    assert run.completed.timed_out
    assert 5 <= run.completed.duration < 30
    assert "starting" in run.output
    assert failure.kind is Kind.HANG
    assert failure.signature == "hang"
    # Compiled and started: the loop runs inside XLA, not in the compiler.
    assert failure.phase is Phase.RUN
    assert failure.compiling is None
    assert failure.signal == "SIGTERM"
    assert failure.status_code is None and failure.site is None and failure.exception is None


def test_success_is_no_failure(program_runs: ProgramRuns) -> None:
    failure = classified(program_runs["success"])
    assert failure.kind is Kind.SUCCESS
    assert not failure.kind.is_failure
    assert failure.phase is Phase.RUN
    assert failure.exit_status == 0
    assert failure.signal is None and failure.status_code is None and failure.site is None
    assert failure.exception is None and failure.compiling is None
    assert failure.headline == "" and failure.describe == "success"


def test_wrong_result_exit_is_the_programs_own_check(program_runs: ProgramRuns) -> None:
    run = program_runs["wrong_result"]
    failure = classified(run)
    assert run.completed.returncode == 1
    assert failure.kind is Kind.EXIT
    assert failure.phase is Phase.RUN
    assert failure.signal is None and failure.status_code is None
    assert failure.site is None and failure.exception is None and failure.compiling is None
    assert "SystemExit" not in run.output  # a string SystemExit prints only its message
    lines = [line.strip() for line in run.output.splitlines() if line.strip()]
    message = next(line for line in lines if line.startswith("wrong result: jax.jit differs"))
    # The headline should be that message; proc reads stdout and stderr on two threads, so the
    # program's last stdout line can land after it (reported as a package bug).
    assert failure.headline in (message[:300], lines[-1][:300])
    # The sizes (16385, 32769) are long numbers; the signature does not depend on them.
    assert "n=N" in failure.signature


def test_unknown_llvm_option_exits_1_as_a_compile_crash(program_runs: ProgramRuns) -> None:
    run = program_runs["llvm_option"]
    failure = classified(run)
    assert run.completed.returncode == 1
    assert "xla: Unknown command line argument" in run.output
    assert failure.kind is Kind.COMPILE_CRASH
    assert failure.phase is Phase.COMPILE
    assert failure.signal is None
    assert failure.compiling == "train_step"
    assert failure.headline.startswith("xla: Unknown command line argument 'bogus_opt'")


# --- normalise -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("pointer 0x7f3a2b4c00 is bad", "pointer 0x? is bad"),
        ("cannot open /tmp/pytest-of-me/p0/dump/module_0001.txt", "cannot open <tmp>"),
        ("cannot open /var/folders/ab/T/x.pb: gone", "cannot open <tmp>: gone"),
        ("cannot open '/private/var/x/y'", "cannot open '<tmp>'"),
        ("bad %constant.47 and fusion.3", "bad %constant.N and fusion.N"),
        ("module SyncTensorsGraph.12 failed", "module SyncTensorsGraph.N failed"),
        ("allocating 4398046511104 bytes", "allocating N bytes"),
        ("short numbers 1234 stay", "short numbers 1234 stay"),
        ("external/xla/xla/service/cpu/cpu_compiler.cc:123] boom", "cpu_compiler.cc:123] boom"),
        ("  many   spaces\there  ", "many spaces here"),
        (
            "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr "
            "(0x7f7b34016bc0 vs. (null)) %constant.48 = u32[4]{0} constant({17, 29})",
            CHECK_SIGNATURE,
        ),
        (
            "foo.cc:1] Check failed: a == b\n  %add.3 = f32[] add()",
            "foo.cc:1] Check failed: a == b",
        ),
        # The condition is the bug's identity: its own parentheses and "<" stay.
        ("foo.cc:2] Check failed: (a) == (b)", "foo.cc:2] Check failed: (a) == (b)"),
        ("foo.cc:3] Check failed: i < n (5 vs. 4)", "foo.cc:3] Check failed: i < n"),
    ],
)
def test_normalise(line: str, expected: str) -> None:
    assert normalise(line) == expected


def test_normalise_drops_the_checkout_of_a_source_path() -> None:
    mine = normalise("File /home/alice/src/proj/train.py:40 in f")
    theirs = normalise("File /opt/ci/checkout/train.py:40 in f")
    assert mine == theirs
    assert mine.endswith("train.py:40 in f")
    assert "alice" not in mine


def test_normalise_caps_the_length() -> None:
    assert len(normalise("word " * 200)) == 300


# --- compile_open --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("", None),
        (
            "Compiling jit(f) with global shapes\nFinished XLA compilation of jit(f) in 0.1 sec",
            None,
        ),
        ("Compiling jit(f) with global shapes", "f"),
        ("Compiling jit(f) x\nCompiling jit(g) x\nFinished XLA compilation of jit(g) in 1 s", "f"),
        ("Compiling jit(f) x\nFinished XLA compilation of jit(f) in 1 s\nCompiling jit(g) x", "g"),
        ("Compiling pmap(step) x", "step"),
        ("Compiling jit(<lambda>) with global shapes", "<lambda>"),
        ("Finished XLA compilation of jit(h) in 1 s", None),
    ],
)
def test_compile_open(output: str, expected: str | None) -> None:
    assert compile_open(output) == expected


# --- exit statuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "signal_name"),
    [(-6, "SIGABRT"), (-11, "SIGSEGV"), (134, "SIGABRT"), (137, "SIGKILL"), (139, "SIGSEGV")],
)
def test_signal_deaths_are_crashes(status: int, signal_name: str) -> None:
    failure = classify("", exit_status=status)
    assert failure.signal == signal_name
    assert failure.kind is Kind.CRASH
    assert failure.headline == f"killed by {signal_name}"


@pytest.mark.parametrize("status", [1, 2, 127, 128])
def test_plain_exit_statuses_are_not_signals(status: int) -> None:
    failure = classify("some message\n", exit_status=status)
    assert failure.signal is None
    assert failure.kind is Kind.EXIT
    assert failure.headline == "some message"


def test_exit_255_is_not_a_signal() -> None:
    failure = classify("", exit_status=255)
    assert failure.signal is None
    assert failure.kind is Kind.EXIT


def test_no_exit_status_and_no_output() -> None:
    failure = classify("", exit_status=None)
    assert failure.signal is None
    assert failure.kind is Kind.EXIT
    assert failure.headline == "exit status None"


def test_interrupted() -> None:
    failure = classify("Compiling jit(f) x\n", exit_status=-2, interrupted=True)
    assert failure.kind is Kind.INTERRUPTED
    assert failure.signature == "interrupted"
    assert failure.compiling == "f"


def test_phase_override() -> None:
    failure = classify("INTERNAL: boom\n", exit_status=1, phase=Phase.COMPILE)
    assert failure.kind is Kind.COMPILE_ERROR
    assert failure.status_code == "INTERNAL"


# --- JSON and same_bug ---------------------------------------------------------------------


def test_failure_json_round_trip(program_runs: ProgramRuns) -> None:
    for name in ("compile_crash", "runtime_error", "success"):
        failure = classified(program_runs[name])
        data = json.loads(json.dumps(failure.to_json()))
        assert data["kind"] == failure.kind.value
        assert data["phase"] == failure.phase.value
        assert Failure.from_json(data) == failure


def test_from_json_ignores_unknown_keys_and_defaults_the_phase() -> None:
    failure = Failure.from_json(
        {"kind": "hang", "headline": "h", "signature": "hang", "from_the_future": 1}
    )
    assert failure == Failure(Kind.HANG, Phase.UNKNOWN, "h", "hang")


def make(kind: Kind, signature: str) -> Failure:
    return Failure(kind, Phase.UNKNOWN, signature, signature)


def test_same_bug() -> None:
    crash = make(Kind.COMPILE_CRASH, CHECK_SIGNATURE)
    assert crash.same_bug(make(Kind.COMPILE_ERROR, CHECK_SIGNATURE))
    assert crash.same_bug(make(Kind.CRASH, CHECK_SIGNATURE))
    assert crash.same_bug(make(Kind.RUNTIME_ERROR, CHECK_SIGNATURE))
    assert not crash.same_bug(make(Kind.COMPILE_CRASH, "other.cc:1] Check failed: x"))
    assert not crash.same_bug(make(Kind.HANG, CHECK_SIGNATURE))
    assert not crash.same_bug(make(Kind.EXIT, CHECK_SIGNATURE))
    assert make(Kind.HANG, "hang").same_bug(make(Kind.HANG, "hang"))
    assert not make(Kind.HANG, "hang").same_bug(make(Kind.INTERRUPTED, "hang"))
