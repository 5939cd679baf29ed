"""signature: classify the real output of real failing programs (tests/programs), run once each."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import traceback
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.programs import ProgramRun, ProgramRuns
from xla_bugkit.failure import value_check
from xla_bugkit.failure.classify import (
    HANG_REPLAY_START_SECONDS,
    Failure,
    Kind,
    Phase,
    Stop,
    classify,
)
from xla_bugkit.failure.compile_log import Busy, busy_in_xla, compile_open
from xla_bugkit.failure.signature import normalise

CHECK_SIGNATURE = "buffer_assignment_util.cc:46] Check failed: const_instr == nullptr"
GLOG_LINE = re.compile(r"^[IWEF]\d{4} ")


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


def stopped_hang(program_runs: ProgramRuns, by: str) -> tuple[ProgramRun, Failure]:
    """The real hang, stopped once it was inside XLA's execution, classified as stopped by
    ``by`` 20 s in, after 3 s without output (the timing is the input here, not measured)."""
    run = program_runs["hang"]
    stop = Stop(by=by, ran=20.0, stalled=3.0)
    failure = classify(
        run.output,
        exit_status=run.completed.returncode,
        timed_out=by == "timeout",
        interrupted=by == "user",
        stop=stop,
    )
    return run, failure


@pytest.mark.parametrize(
    ("by", "how"), [("timeout", "killed by the timeout"), ("user", "stopped by the user")]
)
def test_a_stopped_run_inside_xla_is_a_hang(program_runs: ProgramRuns, by: str, how: str) -> None:
    run, failure = stopped_hang(program_runs, by)
    assert run.completed.returncode == -signal.SIGTERM  # stopped from outside, once ready
    assert "starting" in run.output
    # The compile log's last line is the last thing the program printed; XLA's own log of
    # the snapshot it dumps as the execution starts may come after it.
    printed = [line for line in run.output.splitlines() if not GLOG_LINE.match(line)]
    assert printed[-1].startswith("Finished XLA compilation of jit(spin)")
    assert failure.kind is Kind.HANG
    assert failure.signature == "hang"
    # Compiled and started: the loop runs inside XLA, not in the compiler.
    assert failure.phase is Phase.RUN
    assert failure.executing == "spin"
    assert failure.compiling is None
    assert failure.stopped_by == by
    assert (failure.ran_seconds, failure.stalled_seconds) == (20.0, 3.0)
    assert (
        failure.headline
        == f"XLA was executing jit(spin) with no output for 3.0 s; {how} after 20 s"
    )
    assert failure.describe == f"hang: {failure.headline}"
    assert failure.status_code is None and failure.site is None and failure.exception is None


def test_a_stopped_run_without_timing_still_names_the_function(program_runs: ProgramRuns) -> None:
    run = program_runs["hang"]
    failure = classify(run.output, exit_status=-2, interrupted=True)
    assert failure.kind is Kind.HANG
    assert failure.headline == "XLA was executing jit(spin); stopped by the user"
    assert failure.ran_seconds is None and failure.stalled_seconds is None


def test_a_program_that_printed_after_compiling_was_not_inside_xla(
    program_runs: ProgramRuns,
) -> None:
    output = program_runs["hang"].output + "epoch 1 done\n"
    stop = Stop(by="user", ran=20.0, stalled=3.0)
    interrupted = classify(output, exit_status=-2, interrupted=True, stop=stop)
    assert interrupted.kind is Kind.INTERRUPTED
    assert interrupted.signature == "interrupted"
    assert interrupted.headline == "stopped by the user"
    assert interrupted.executing is None
    assert (interrupted.ran_seconds, interrupted.stalled_seconds) == (20.0, 3.0)
    timed_out = classify(output, exit_status=-15, timed_out=True, stop=replace(stop, by="timeout"))
    assert timed_out.kind is Kind.HANG  # a timeout is a hang wherever the program was
    assert timed_out.headline == "killed after the timeout"
    assert timed_out.executing is None and timed_out.stopped_by == "timeout"


KEYBOARD_INTERRUPT = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 9, in <module>\n'
    "    print(compiled(x))\n"
    "KeyboardInterrupt\n"
)


def test_the_traceback_of_the_stop_itself_does_not_count(program_runs: ProgramRuns) -> None:
    """Should XLA let go of the interrupt, Python prints its traceback: the stop's, not news."""
    output = program_runs["hang"].output + KEYBOARD_INTERRUPT
    failure = classify(output, exit_status=1, interrupted=True, stop=Stop("user", 9.0, 8.5))
    assert failure.kind is Kind.HANG and failure.executing == "spin"
    # What the program printed before it still counts.
    output = program_runs["hang"].output + "step 1\n" + KEYBOARD_INTERRUPT
    failure = classify(output, exit_status=1, interrupted=True, stop=Stop("user", 9.0, 8.5))
    assert failure.kind is Kind.INTERRUPTED


def test_a_hang_replays_as_long_as_it_went_without_progress(program_runs: ProgramRuns) -> None:
    _, hang = stopped_hang(program_runs, "user")
    # 3 s without output, plus the time a replay child needs to import jax and compile.
    assert hang.replay_timeout(300.0) == 3.0 + HANG_REPLAY_START_SECONDS
    assert hang.replay_timeout(10.0) == 10.0  # never more than the limit asked for
    assert replace(hang, stalled_seconds=1e6).replay_timeout(300.0) == 300.0
    assert replace(hang, stalled_seconds=None).replay_timeout(300.0) == 300.0
    crash = classified(program_runs["compile_crash"])
    assert crash.replay_timeout(300.0) == 300.0


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
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.phase is Phase.RUN
    assert failure.signal is None and failure.status_code is None
    assert failure.site is None and failure.exception is None and failure.compiling is None
    assert "SystemExit" not in run.output  # a string SystemExit prints only its message
    lines = [line.strip() for line in run.output.splitlines() if line.strip()]
    message = next(line for line in lines if line.startswith("wrong result: jax.jit differs"))
    # The program's own message, wherever the reader threads put it among the stdout lines
    # (which count mismatches too, but do not say "wrong").
    assert failure.headline == message[:300]
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


def test_a_training_loop_check_is_the_signature_not_the_last_line(
    program_runs: ProgramRuns,
) -> None:
    """tests/programs/training_wrong.py logs the wrong value it found, trains on, prints
    "done in 4.0s" and exits 1: the signature is what its check said."""
    run = program_runs["training_wrong"]
    failure = classified(run)
    assert run.completed.returncode == 1
    assert failure.kind is Kind.WRONG_RESULT and failure.phase is Phase.RUN
    assert failure.headline.startswith("feature energy mismatch: 1 of 16385 rows wrong (row ")
    assert failure.signature.startswith("feature energy mismatch: 1 of N rows wrong (row N: ")
    last = [line for line in run.output.splitlines() if line.strip()][-1]
    assert last.startswith("done in ") and "done in" not in failure.signature


# --- wrong values: the program's own check ------------------------------------------------

TRACEBACK = """\
Traceback (most recent call last):
  File "/home/alice/train.py", line 88, in <module>
    main()
  File "/home/alice/train.py", line 80, in main
"""

# np.testing.assert_allclose as numpy 2 prints it ("AssertionError: " ends in a space).
NP_TESTING = (
    TRACEBACK
    + "    np.testing.assert_allclose(logits, expected, rtol=1e-5)\n"
    + '  File "/venv/lib/python3.11/site-packages/numpy/testing/_private/utils.py", '
    + "line 983, in assert_array_compare\n"
    + "    raise AssertionError(msg)\n"
    + "AssertionError: \n"
    + """\
Not equal to tolerance rtol=1e-05, atol=0

Mismatched elements: 1 / 32769 (0.00305%)
Mismatch at index:
 [32768]: 1.07 (ACTUAL), 0.5 (DESIRED)
Max absolute difference among violations: 0.57
 ACTUAL: array([0.1, 0.2, ...])
 DESIRED: array([0.1, 0.2, ...])
"""
)
BARE_ASSERT = TRACEBACK + "    assert not np.isnan(loss), loss_history\nAssertionError\n"
DEBUG_NANS = (
    TRACEBACK
    + """\
    loss = step(params, batch)
           ^^^^^^^^^^^^^^^^^^^
FloatingPointError: invalid value (nan) encountered in jit(step)
"""
)
NAN_CHECK = (
    TRACEBACK
    + "    raise ValueError(f'loss is NaN at step {i}')\nValueError: loss is NaN at step 412\n"
)
PRINTED_THEN_EXIT = """\
Compiling jit(train_step) with global shapes and types (ShapedArray(float32[128,784]),).
step 100: loss 0.3121
eval: max |jit - numpy| = 0.57 at [32768]: MISMATCH
step 200: loss nan
I1202 09:49:08.829582  1892 cpu_client.cc:120] loss scale NaN guard active
Finished XLA compilation of jit(scatter-add) in 0.01 sec
done in 11.4s
"""


@pytest.mark.parametrize(
    ("output", "headline", "exception"),
    [
        (
            NP_TESTING,
            "AssertionError: Not equal to tolerance rtol=1e-05, atol=0; "
            "Mismatched elements: 1 / 32769 (0.00305%)",
            "AssertionError",
        ),
        (BARE_ASSERT, "AssertionError: assert not np.isnan(loss), loss_history", "AssertionError"),
        (
            DEBUG_NANS,
            "FloatingPointError: invalid value (nan) encountered in jit(step)",
            "FloatingPointError",
        ),
        (NAN_CHECK, "ValueError: loss is NaN at step 412", "ValueError"),
        # No traceback: the line that says the value is wrong, not "done in 11.4s"; a
        # mismatch beats a NaN in a later log line, and glog and compile-log lines never count.
        (PRINTED_THEN_EXIT, "eval: max |jit - numpy| = 0.57 at [32768]: MISMATCH", None),
    ],
)
def test_a_failed_value_check_is_a_wrong_result(
    output: str, headline: str, exception: str | None
) -> None:
    failure = classify(output, exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.headline == headline
    assert failure.signature == normalise(headline)
    assert failure.exception == exception
    assert failure.describe == f"wrong result: {headline}"


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        # The program's own mistake about shapes is no wrong value.
        (TRACEBACK + "ValueError: shape mismatch: (3,) vs (4,)\n", Kind.EXIT),
        (TRACEBACK + "ValueError: expected 3 values, got 4\n", Kind.EXIT),
        # XLA's own status stays XLA's, whatever words its message uses.
        (
            TRACEBACK + "jax.errors.JaxRuntimeError: INTERNAL: operand mismatch in fusion\n",
            Kind.RUNTIME_ERROR,
        ),
        ("step 1: loss 0.3\nstep 2: loss 0.2\nexiting\n", Kind.EXIT),
    ],
)
def test_other_failures_are_not_wrong_results(output: str, kind: Kind) -> None:
    assert classify(output, exit_status=1).kind is kind


def test_a_run_that_succeeds_is_no_wrong_result_whatever_it_printed() -> None:
    assert classify(PRINTED_THEN_EXIT, exit_status=0).kind is Kind.SUCCESS


def test_a_wrong_result_is_its_own_family() -> None:
    wrong = make(Kind.WRONG_RESULT, "x mismatch")
    assert wrong.same_bug(make(Kind.WRONG_RESULT, "x mismatch"))
    assert not wrong.same_bug(make(Kind.EXIT, "x mismatch"))
    assert not wrong.same_bug(make(Kind.RUNTIME_ERROR, "x mismatch"))
    assert Failure.from_json(wrong.to_json()) == wrong


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


def test_interrupted_outside_xla() -> None:
    output = "Compiling jit(f) x\nFinished XLA compilation of jit(f) in 1 s\nstep 1\n"
    failure = classify(output, exit_status=-2, interrupted=True)
    assert failure.kind is Kind.INTERRUPTED
    assert failure.signature == "interrupted"
    assert failure.stopped_by == "user"


def test_interrupted_while_compiling_is_a_hang_in_the_compiler() -> None:
    failure = classify("Compiling jit(f) x\n", exit_status=-2, interrupted=True)
    assert failure.kind is Kind.HANG
    assert failure.phase is Phase.COMPILE
    assert failure.compiling == "f" and failure.executing is None
    assert failure.headline == "XLA was compiling jit(f); stopped by the user"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("", None),
        ("hello\n", None),
        ("Compiling jit(f) with global shapes\n", Busy(True, "f", "jit(f)")),
        (
            "Compiling jit(f) x\nFinished jaxpr to MLIR module conversion jit(f) in 0.1 sec\n",
            Busy(True, "f", "jit(f)"),
        ),
        (
            "Compiling pmap(g) x\nFinished XLA compilation of pmap(g) in 1 s\n\n",
            Busy(False, "g", "pmap(g)"),
        ),
        (
            "Finished XLA compilation of jit(f) in 1 s\n"
            "W1202 09:49:08.829582  1892 cpu_client.cc:12] slow\n",
            Busy(False, "f", "jit(f)"),
        ),
        ("Finished XLA compilation of jit(f) in 1 s\nloss 0.5\n", None),
        (
            "Finished XLA compilation of jit(f) in 1 s\nloss 0.5\nCompiling jit(g) x",
            Busy(True, "g", "jit(g)"),
        ),
    ],
)
def test_busy_in_xla(output: str, expected: Busy | None) -> None:
    assert busy_in_xla(output) == expected


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


def test_same_bug_across_two_xla_versions() -> None:
    """A PyTorch/XLA run replayed under jaxlib: torch_xla drops the status code, and the two
    XLAs number computations differently (region_1.1 in one, region_0.1 in the other)."""
    message = "RngBitGenerator should be expanded for CPU."
    torch = make(Kind.COMPILE_ERROR, normalise(message))
    jaxlib = make(Kind.COMPILE_ERROR, normalise(f"UNIMPLEMENTED: {message}"))
    assert torch.same_bug(jaxlib) and jaxlib.same_bug(torch)
    check = "hlo_verifier.cc:1] Check failed: computation {} called from %reduce.4 in {}"
    one = make(Kind.CRASH, normalise(check.format("region_1.1", "SyncTensorsGraph.12")))
    other = make(Kind.CRASH, normalise(check.format("region_0.1", "SyncTensorsGraph.9")))
    assert one.same_bug(other)
    # Computation names are each build's own: the site and the condition identify the bug.
    assert one.same_bug(make(Kind.CRASH, normalise(check.format("body.1", "main.3"))))
    assert not one.same_bug(make(Kind.CRASH, "hlo_verifier.cc:1] Check failed: shape of x"))
    # torch_xla's words for jaxlib's "Map key not found: region_1.1, true".
    map_key = "map_util.h:50] Check failed: it != collection.end() Map key not found: {}"
    torch_key = make(Kind.COMPILE_CRASH, normalise(map_key.format("Reduce.2, 1")))
    assert torch_key.same_bug(
        make(Kind.COMPILE_CRASH, normalise(map_key.format("region_1.1, true")))
    )
    assert not torch_key.same_bug(
        make(Kind.COMPILE_CRASH, normalise("map_util.h:50] Check failed: x"))
    )
    assert not torch.same_bug(make(Kind.COMPILE_ERROR, "UNIMPLEMENTED: Sort should be expanded."))


# Lines of a real run (a Cholesky fit under the program's own 6 GiB RLIMIT_AS): the module
# failed while it ran; the error reached Python at the next read, wrapped by the dispatch,
# and the computations given its broken result wrap it again (as a notebook's did thrice).
ASYNC_OOM = (
    "E1203 04:44:28.714159    6573 cpu_client.cc:1933] Failed to get literal for result: "
    "RESOURCE_EXHAUSTED: Out of memory allocating 6144128088 bytes.\n"
    + TRACEBACK
    + "jax.errors.JaxRuntimeError: INTERNAL: Error dispatching computation: Error dispatching "
    "computation: Out of memory allocating 6144128088 bytes.\n"
)


def test_an_asynchronous_failure_is_its_inner_status_as_a_replay_raises_it() -> None:
    failure = classify(ASYNC_OOM, exit_status=1)
    assert failure.kind is Kind.RUNTIME_ERROR
    # The code XLA's own line gives, not the wrapper's INTERNAL.
    assert failure.signature == normalise("RESOURCE_EXHAUSTED: Out of memory allocating N bytes.")
    replayed = classify(
        TRACEBACK + "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating "
        "6144128088 bytes.\n",
        exit_status=1,
    )
    assert failure.same_bug(replayed)
    # A bundle written before the wrappers came off still matches the bare status.
    old = replace(failure, signature="INTERNAL: Error dispatching computation: Out of memory "
                  "allocating N bytes.")  # fmt: skip
    assert old.same_bug(replayed)


def test_a_wrong_result_is_the_line_of_the_check_that_failed() -> None:
    # A program that runs two checks: the one that passed prints a count of zero after the
    # one that failed; the failed one is the failure, wherever it lands in the output.
    output = (
        "evaluating 144000 points\n"
        "SHARDING CHECK FAILED: sharded eval_radii differs from numpy at 12876 of 144000 "
        "points\n"
        "single-device run vs numpy: 0 mismatches\n"
        "Mismatched elements: 0 / 144000\n"
        "NaN count: 0\n"
        "done\n"
    )
    failure = classify(output, exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.headline.startswith("SHARDING CHECK FAILED: sharded eval_radii differs")
    # A line that counts nothing wrong is never the failure.
    assert classify("vs numpy: 0 mismatches\n", exit_status=1).kind is Kind.EXIT


def test_a_launchers_prefix_does_not_hide_xlas_fatal_line() -> None:
    fatal = "F1204 10:00:00.000000  1234 algebraic_simplifier.cc:586] Check failed: a == b"
    for prefix in ("[rank1] ", "[rank1]: ", "[default1]:", "1: ", "[1,0]<stderr>:", "(pid=77) "):
        output = f"{prefix}starting\n{prefix}{fatal}\n"
        failure = classify(output, exit_status=-6)
        assert failure.site == "algebraic_simplifier.cc:586", prefix
        assert failure.headline == "algebraic_simplifier.cc:586] Check failed: a == b", prefix


def test_faulthandlers_line_is_no_message_of_the_crash() -> None:
    # pytest's faulthandler prints the signal's name where XLA's CHECK line was captured.
    output = (
        "test_model.py ..\nFatal Python error: Aborted\n\nThread 0x01 (most recent call first):\n"
    )
    failure = classify(output, exit_status=-6)
    assert failure.headline == "killed by SIGABRT" and failure.message_lost
    own = classify("Fatal Python error: PyThreadState_Get: no current thread\n", exit_status=-6)
    assert own.headline.startswith("Fatal Python error: PyThreadState_Get") and not own.message_lost


def test_reading_a_result_xla_failed_to_compute_is_that_failure() -> None:
    # The program reads the result of a run that could not allocate: XLA aborts on a CHECK,
    # where a replay, which waits on the result first, gets the allocation's status.
    output = "F1204 18:33:15.873025   10545 raw_buffer.h:106] Check failed: buffer_.IsConcrete() \n"
    crash = classify(output, exit_status=-6)
    oom = make(Kind.RUNTIME_ERROR, "RESOURCE_EXHAUSTED: Out of memory allocating N bytes.")
    assert crash.kind is Kind.CRASH and crash.same_bug(oom) and oom.same_bug(crash)
    assert not crash.same_bug(make(Kind.COMPILE_ERROR, "INTERNAL: boom"))


def test_a_headline_that_names_its_kind_is_not_prefixed_twice() -> None:
    line = "wrong result: jax.jit differs from numpy: 1 wrong elements"
    failure = classify(f"{line}\n", exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.describe == line  # not "wrong result: wrong result: ..."


def _np_testing_output(actual: np.ndarray, desired: np.ndarray, rtol: float) -> str:
    """What a program's own np.testing check prints when it fails (numpy's real message)."""
    try:
        np.testing.assert_allclose(actual, desired, rtol=rtol)
    except AssertionError:
        return traceback.format_exc()
    raise AssertionError("the check passed")


def test_a_check_tighter_than_float32_can_hold_says_so() -> None:
    output = _np_testing_output(np.full(8, 0.1, np.float32), np.full(8, 0.1), rtol=1e-9)
    failure = classify(output, exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.check_note is not None
    assert re.fullmatch(
        r"the check's largest relative difference, 1\.5e-08, is 0\.13 times float32's "
        r"epsilon \(1\.19e-07\): rounding in float32 alone reaches that, so a tolerance this "
        r"tight can fail on a correct result",
        failure.check_note,
    ), failure.check_note


@pytest.mark.parametrize(
    ("actual", "desired"),
    [
        (np.array([1.0, 2.0, 3.5], np.float32), np.array([1.0, 2.0, 3.0])),  # really wrong
        (np.array([1.0, 2.0 + 1e-12]), np.array([1.0, 2.0])),  # float64: 2.5e-13 is no rounding
        (np.array([1, 2, 4], np.int32), np.array([1, 2, 3])),  # integers: no epsilon
    ],
)
def test_a_difference_beyond_rounding_gets_no_note(actual: np.ndarray, desired: np.ndarray) -> None:
    output = _np_testing_output(actual, desired, rtol=1e-14)
    assert classify(output, exit_status=1).kind is Kind.WRONG_RESULT
    assert value_check.check_note(output) is None


def test_numpy_1s_report_is_read_too() -> None:
    output = NP_TESTING.replace(
        "Max absolute difference among violations: 0.57\n ACTUAL: array([0.1, 0.2, ...])\n"
        " DESIRED: array([0.1, 0.2, ...])\n",
        "Max absolute difference: 3e-08\nMax relative difference: 3e-07\n"
        " x: array([0.1, 0.2, 0.3], dtype=float32)\n y: array([0.1, 0.2, 0.3])\n",
    )
    note = value_check.check_note(output)
    assert note is not None and "is 2.5 times float32's epsilon" in note


def _pytest_output(tmp_path: Path, check: str) -> str:
    """What pytest prints for a test whose np.testing check fails (real pytest, real numpy)."""
    test = tmp_path / "test_values.py"
    test.write_text(f"import numpy as np\n\ndef test_values():\n    {check}\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_under_pytest_the_headline_is_the_failed_check_not_a_line_of_its_report(
    tmp_path: Path,
) -> None:
    """pytest marks the exception's lines "E" and prints no traceback: the headline was
    "E       First 5 mismatches are at indices:"."""
    check = (
        "a = np.arange(40000, dtype=np.float32).reshape(2, 20000); b = a.copy(); "
        "b[0, 16384:16400] += 7; np.testing.assert_allclose(a, b, rtol=1e-4)"
    )
    failure = classify(_pytest_output(tmp_path, check), exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.headline == (
        "AssertionError: Not equal to tolerance rtol=0.0001, atol=0; "
        "Mismatched elements: 16 / 40000 (0.04%)"
    )
    assert failure.exception == "AssertionError"


def test_under_pytest_a_check_tighter_than_float32_can_hold_says_so(tmp_path: Path) -> None:
    check = "np.testing.assert_allclose(np.full(8, 0.1, np.float32), np.full(8, 0.1), rtol=1e-9)"
    failure = classify(_pytest_output(tmp_path, check), exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.check_note is not None and "float32's epsilon" in failure.check_note


def test_without_xlas_own_line_an_asynchronous_failure_is_quoted_as_python_saw_it() -> None:
    # The process that failed logged nothing of its own (a launcher's child, say): the code
    # of the inner status is unknown, and "INTERNAL: Out of memory ..." was never printed.
    raised = (
        "jax.errors.JaxRuntimeError: INTERNAL: Error dispatching computation: Out of memory "
        "allocating 2304000000 bytes.\n"
    )
    failure = classify(TRACEBACK + raised, exit_status=1)
    assert failure.headline == raised.split(": ", 1)[1].strip()
    replayed = classify(
        TRACEBACK + "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating "
        "2304000000 bytes.\n",
        exit_status=1,
    )
    assert failure.same_bug(replayed)


def test_xlas_status_quoted_in_the_programs_own_words_is_xlas_error() -> None:
    # The program caught XLA's error, said so in its own words and left (os._exit(3)).
    said = (
        "batch 2: n=512 nearest-neighbour distance 0.412\n"
        "job failed in XLA: INTERNAL: Error dispatching computation: Error dispatching "
        "computation: Out of memory allocating 4398046511104 bytes.\n"
    )
    f = classify(said, exit_status=3)
    assert f.kind is Kind.RUNTIME_ERROR and f.status_code == "INTERNAL"
    assert f.signature == "INTERNAL: Out of memory allocating N bytes."
    # A Python exception line is still what the run ended on; a line without a status code
    # is the program's own.
    raised = f"{said}Traceback (most recent call last):\nValueError: bad batch\n"
    assert classify(raised, exit_status=1).kind is Kind.EXIT
    assert classify("job failed: disk full\n", exit_status=3).kind is Kind.EXIT


def test_two_bare_deaths_on_one_signal_are_one_way_of_dying_whatever_python_was_doing() -> None:
    """The run segfaulted with no line while Python compiled the next function and the device
    still ran the last one; the replay of that one segfaulted while running."""
    from xla_bugkit.failure.record import Failure as Record

    run = Record(Kind.COMPILE_CRASH, Phase.COMPILE, "killed by SIGSEGV", "killed by SIGSEGV",
                 signal="SIGSEGV", message_lost=True)  # fmt: skip
    replayed = Record(Kind.CRASH, Phase.RUN, "killed by SIGSEGV", "killed by SIGSEGV",
                      signal="SIGSEGV")  # fmt: skip
    assert run.same_bug(replayed) and replayed.same_bug(run)
    # A replay that says what killed it is another matter: the phase must then agree.
    check = Record(Kind.CRASH, Phase.RUN, "x.cc:1] Check failed: y", "x.cc:1] Check failed: y",
                   signal="SIGSEGV")  # fmt: skip
    assert not run.same_bug(check)
    assert not run.same_bug(Record(Kind.CRASH, Phase.RUN, "killed by SIGABRT",
                                   "killed by SIGABRT", signal="SIGABRT"))  # fmt: skip


@pytest.mark.parametrize(
    ("said", "headline"),
    [
        (  # logging's "%(asctime)s %(levelname)s %(name)s: %(message)s"
            "2026-12-07 01:50:13,893 ERROR ctr: loss is nan at hour 07; refusing to write a "
            "checkpoint",
            "ERROR ctr: loss is nan at hour 07; refusing to write a checkpoint",
        ),
        (  # an ISO time in brackets, as structured loggers print it
            "[2026-12-07T01:50:13.893Z] eval: accuracy mismatch against the golden file",
            "eval: accuracy mismatch against the golden file",
        ),
        (
            "2026-12-07 01:50:13 - trainer - ERROR - loss is NaN after step 40",
            "trainer - ERROR - loss is NaN after step 40",
        ),
    ],
)
def test_a_programs_log_time_is_not_part_of_its_failure(said: str, headline: str) -> None:
    """The time differs on every run: kept, it made every run's title and signature new."""
    output = f"step 1 ok\n{said}\n"
    failure = classify(output, exit_status=1)
    assert failure.headline == headline, failure
    again = classify(output.replace("01:50:13", "02:07:55"), exit_status=1)
    assert again.signature == failure.signature


# np.testing's message as a program prints it after catching the AssertionError (numpy 2.x,
# a real run's last lines): its exception line is not in the output.
CAUGHT_ALLCLOSE = """\
   max drawdown:       15169.12        14190.94        16083.06        14652.81
PARITY CHECK FAILED - not publishing to dashboard

Not equal to tolerance rtol=1e-06, atol=0
max drawdown drifted from reference
Mismatched elements: 4 / 4 (100%)
Mismatch at indices:
 [0]: 15169.125 (ACTUAL), 15169.291891872883 (DESIRED)
 [1]: 14190.9375 (ACTUAL), 14190.982472147793 (DESIRED)
Max absolute difference among violations: 0.16689187
Max relative difference among violations: 1.10019554e-05
 ACTUAL: array([15169.125 , 14190.9375, 16083.0625, 14652.8125], dtype=float32)
 DESIRED: array([15169.291892, 14190.982472, 16083.09147 , 14652.864591])
"""


def test_np_testings_message_printed_by_the_program_is_the_headline() -> None:
    failure = classify(CAUGHT_ALLCLOSE, exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT
    assert failure.headline == (
        "Not equal to tolerance rtol=1e-06, atol=0; max drawdown drifted from reference; "
        "Mismatched elements: 4 / 4 (100%)"
    )
    # Without np.testing's first line, a heading ("Mismatch at indices:") is never the line.
    rest = CAUGHT_ALLCLOSE.replace("Not equal to tolerance rtol=1e-06, atol=0\n", "")
    assert classify(rest, exit_status=1).headline != "Mismatch at indices:"
