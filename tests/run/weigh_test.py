"""weigh: the failing process's own record outweighs what its output let through."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from xla_bugkit.failure.classify import (
    HANG_REPLAY_START_SECONDS,
    Failure,
    Kind,
    Phase,
    Stop,
    classify,
)
from xla_bugkit.run.evidence import Event, ProcessEvidence, Uncaught
from xla_bugkit.run.processes import Culprit, failing
from xla_bugkit.run.weigh import weigh

ABORTED = "Fatal Python error: Aborted\n\nThread 0x01 (most recent call first):\n  File ..."
SEGFAULT = "Fatal Python error: Segmentation fault\n\nCurrent thread 0x01:\n  File ..."


def process(
    pid: int, *events: Event, stack: str | None = None, **fields: object
) -> ProcessEvidence:
    return ProcessEvidence(pid, 1, ("python",), events, platform="cpu", stack=stack, **fields)  # type: ignore[arg-type]


def compiling(n: int, name: str, *, ended: float | None = None) -> Event:
    return Event("compile", n, f"jit_{name}", n, fun=f"jit({name})", started=n, ended=ended)


def running(n: int, name: str, *, ended: float | None = None) -> Event:
    return Event("execute", n, f"jit_{name}", n, started=n, ended=ended)


def test_a_crash_whose_fatal_line_was_captured_away() -> None:
    # pytest's fd capture: the run shows only the signal; the process was compiling.
    run = classify("collected 3 items\n\ntest_model.py .", exit_status=-6)
    assert run.headline == "killed by SIGABRT" and run.kind is Kind.CRASH
    culprit = failing([process(7, compiling(1, "augment"), stack=ABORTED)])
    weighed = weigh(run, culprit)
    assert weighed.kind is Kind.COMPILE_CRASH and weighed.phase is Phase.COMPILE
    assert weighed.compiling == "augment" and weighed.signal == "SIGABRT"
    assert weighed.message_lost
    assert weighed.evidence == "pid 7 died on SIGABRT (it crashed while compiling jit_augment)"
    assert weigh(weighed, culprit) == weighed  # weighed once


def test_a_workers_death_behind_its_parents_exit() -> None:
    # The parent (no jax) prints its own error and exits 1; a spawn worker died in XLA.
    run = classify("RuntimeError: worker 2 died\n", exit_status=1)
    assert run.kind is Kind.EXIT
    worker = process(9, running(1, "eval_step"), stack=SEGFAULT)
    healthy = process(8, running(1, "eval_step", ended=2.0), exited=True, exit_status=0)
    culprit = failing([healthy, worker])
    assert culprit is not None and culprit.process.pid == 9
    weighed = weigh(run, culprit)
    assert weighed.kind is Kind.CRASH and weighed.signal == "SIGSEGV"
    assert weighed.executing == "eval_step" and weighed.message_lost
    assert "the run's own last message was: RuntimeError: worker 2 died" in str(weighed.evidence)


def test_a_captured_fatal_line_stays_the_headline() -> None:
    output = "F1204 10:00:00.000000  1 buffer_assignment_util.cc:46] Check failed: c == nullptr\n"
    run = classify(output, exit_status=-6)
    weighed = weigh(run, failing([process(7, compiling(1, "add_noise"), stack=ABORTED)]))
    assert weighed.headline == run.headline and not weighed.message_lost
    assert weighed.kind is Kind.COMPILE_CRASH and weighed.compiling == "add_noise"


def test_a_stop_is_a_hang_only_when_the_process_was_inside_xla() -> None:
    stop = Stop("user", ran=20.0, stalled=12.0)
    run = classify("ready\n", exit_status=-2, interrupted=True, stop=stop)
    assert run.kind is Kind.INTERRUPTED
    busy = weigh(run, failing([process(5, running(1, "scale"))]))
    assert busy.kind is Kind.HANG and busy.executing == "scale"
    assert busy.headline == (
        "XLA was executing jit(scale) with no output for 12 s; stopped by the user after 20 s"
    )
    idle = weigh(run, failing([process(5, running(1, "scale", ended=3.0))]))
    assert idle.kind is Kind.INTERRUPTED


# faulthandler's dump at the stop of a program blocked reading a jitted result to the host.
WAITING = """Thread 0x00007f0000000001 (most recent call first):
  File "/venv/lib/python3.11/site-packages/jax/_src/array.py", line 654 in _value
  File "/venv/lib/python3.11/site-packages/jax/_src/array.py", line 307 in __float__
  File "/home/u/implied_vol.py", line 41 in main
"""


def test_a_program_waiting_for_a_result_when_stopped_hangs_in_that_execution() -> None:
    """Execution is asynchronous: the dispatch of jit(solve) had returned, and the program
    blocked in float() on its result. Stopped there, it hangs in jit(solve); its stack at
    the stop says so (it was called "interrupted", "XLA was not busy at the end")."""
    stop = Stop("user", ran=30.0, stalled=25.0)
    run = classify("iteration 3\n", exit_status=-2, interrupted=True, stop=stop)
    events = (running(1, "prepare", ended=1.5), running(2, "solve", ended=2.1))
    hung = weigh(run, failing([process(5, *events, stack=WAITING)]))
    assert hung.kind is Kind.HANG and hung.phase is Phase.RUN and hung.executing == "solve"
    assert hung.headline == (
        "XLA was executing jit(solve) with no output for 25 s; stopped by the user after 30 s"
    )
    assert hung.evidence is not None and "waiting for the result of jit(solve)" in hung.evidence
    # Stopped while doing something else (its own Python code), it was interrupted.
    elsewhere = WAITING.replace("jax/_src/array.py", "numpy/linalg.py")
    idle = weigh(run, failing([process(5, *events, stack=elsewhere)]))
    assert idle.kind is Kind.INTERRUPTED


def test_runs_in_sequence_are_judged_by_the_last() -> None:
    # `bash run.sh`: the program ran twice; the second run's sys.exit(1) is the command's.
    first = process(3, running(1, "step", ended=1.5), exited=True, exit_status=0, exited_at=2.0)
    second = process(4, Event("execute", 1, "jit_step", 1, started=5.0, ended=6.0),
                     exited=True, exit_status=1, exit_how="sys.exit", exited_at=7.0)  # fmt: skip
    culprit = failing([first, second])
    assert culprit is not None and culprit.process.pid == 4
    assert culprit.why == "it exited with status 1 (sys.exit)"
    # `raise SystemExit(message)`: no sys.exit call, and no uncaught exception either.
    raised = process(4, Event("execute", 1, "jit_step", 1, started=5.0, ended=6.0),
                     exited=True, exit_status=1, exit_how="SystemExit", exited_at=7.0)  # fmt: skip
    by_message = failing([first, raised])
    assert by_message is not None
    assert by_message.why == "it exited with status 1 (SystemExit with a message)"
    # Two that passed: the last one ran last, not the first to start XLA.
    passed = process(4, Event("execute", 1, "jit_step", 1, started=5.0, ended=6.0),
                     exited=True, exit_status=0, exited_at=7.0)  # fmt: skip
    again = failing([first, passed])
    assert again is not None and again.process.pid == 4
    assert again.why == "no process recorded a failure; the last of 2 that ran one after another"
    # Ranks that overlap are not a sequence: the first to stop still wins among equals.
    overlapping = process(4, running(1, "step"), exited=False)
    assert failing([process(3, running(1, "step")), overlapping]).process.pid == 3  # type: ignore[union-attr]


def test_nothing_recorded_leaves_the_failure_as_it_was() -> None:
    run = Failure(Kind.EXIT, Phase.UNKNOWN, "ValueError: x", "ValueError: x", 1)
    assert weigh(run, None) is run
    assert weigh(run, Culprit(process(1), "it exited normally")) == run


def test_an_xla_error_the_program_caught_and_logged() -> None:
    # The program logs XLA's error with log.error and exits 1 on its own terms: XLA's status
    # quoted in its line is XLA's error, and the process's record names the execution.
    logged = (
        "ERROR nightly: pair table failed: RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes."
    )
    run = classify(f"{logged}\n", exit_status=1)
    assert run.kind is Kind.RUNTIME_ERROR
    oom = "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes."
    raised = Event("execute", 1, "jit_pair_table", 4, started=1.0, ended=2.0, error=oom)
    weighed = weigh(run, failing([process(6, raised, exited=True, exit_status=1)]))
    assert weighed.kind is Kind.RUNTIME_ERROR and weighed.status_code == "RESOURCE_EXHAUSTED"
    assert weighed.headline == "RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes."
    assert weighed.executing == "pair_table"
    # Said without XLA's status, only the record shows it was XLA's.
    reworded = "ERROR nightly: pair table failed: out of memory"
    run = classify(f"{reworded}\n", exit_status=1)
    assert run.kind is Kind.EXIT
    weighed = weigh(run, failing([process(6, raised, exited=True, exit_status=1)]))
    assert weighed.kind is Kind.RUNTIME_ERROR and weighed.executing == "pair_table"
    assert str(weighed.evidence).endswith(f"its own message: {reworded}")
    # A Python error it caught is no XLA error: the run stays as it was.
    python = Event("execute", 1, "jit_f", 4, started=1.0, ended=2.0, error="ValueError: bad")
    assert weigh(run, failing([process(6, python, exited=True, exit_status=1)])) == run


def test_a_stopped_call_found_only_when_asked_says_whether_its_arguments_were_read() -> None:
    """jax's fast path ran the call; the hook found it when collect asked before the stop."""
    stop = Stop(by="timeout", ran=90.0, stalled=80.0)
    stopped = classify("step 4\n", exit_status=-15, timed_out=True, stop=stop)
    seen = "its thread was inside the call solve(*batch) at train.py:40, which jax ran ..."
    found = Event("execute", 9, "jit_solve", 3, started=9.0, seen=seen)
    ran_once = running(2, "solve", ended=3.0)
    culprit = failing([process(7, compiling(1, "solve", ended=1.5), ran_once, found)])
    weighed = weigh(stopped, culprit)
    assert weighed.kind is Kind.HANG and weighed.executing == "solve"
    assert weighed.unread_inputs
    assert weighed.evidence == (
        f"pid 7 was executing jit(solve) when it was stopped: {seen}; its arguments could "
        "not be read"
    )
    with_arguments = Event("execute", 9, "jit_solve", 3, started=9.0, seen=seen, args=Path("a"))
    read = weigh(stopped, failing([process(7, compiling(1, "solve", ended=1.5), with_arguments)]))
    assert not read.unread_inputs and read.evidence == (
        f"pid 7 was executing jit(solve) when it was stopped: {seen}"
    )


def test_a_process_stopped_from_outside_while_waiting_on_a_result_is_a_hang() -> None:
    """``timeout 25 python solve.py``: the wrapper's SIGTERM, not collect, stopped the
    program while it waited for jit(solve)'s result; the command exited 124."""
    run = classify("solving again to a residual of 1e-09\n", exit_status=124)
    assert run.kind is Kind.EXIT and run.stopped_by is None
    waiting = (
        "Current thread 0x01 (most recent call first):\n"
        '  File "/env/site-packages/jax/_src/array.py", line 301 in __float__\n'
        '  File "/home/u/solve.py", line 51 in <module>\n'
    )
    solved_once = running(2, "solve", ended=3.0)
    culprit = failing([process(7, compiling(1, "solve", ended=1.5), solved_once, stack=waiting)])
    weighed = weigh(run, culprit)
    assert weighed.kind is Kind.HANG and weighed.stopped_by == "signal"
    assert weighed.executing == "solve"
    assert weighed.headline.endswith("; stopped by a SIGTERM or SIGINT from outside collect")
    # One that exited on its own, or died on a fatal signal, is no such stop.
    exited = process(7, compiling(1, "solve", ended=1.5), solved_once, stack=waiting, exited=True)
    assert weigh(run, failing([exited])).kind is Kind.EXIT


def test_a_process_that_answered_is_not_read_from_its_stack_alone() -> None:
    """Asked before collect's stop, it had nothing under way (a loop that reads each step's
    loss, caught in ``float``): its stack's wait is no hang of the last execution."""
    stop = Stop(by="timeout", ran=90.0, stalled=80.0)
    stopped = classify("step 400\n", exit_status=-15, timed_out=True, stop=stop)
    waiting = '  File "/env/site-packages/jax/_src/array.py", line 301 in __float__\n'
    events = (compiling(1, "step", ended=1.5), running(2, "step", ended=3.0))
    unasked = weigh(stopped, failing([process(7, *events, stack=waiting)]))
    assert unasked.kind is Kind.HANG and unasked.executing == "step"
    answered = weigh(stopped, failing([process(7, *events, stack=waiting, answered=True)]))
    assert answered.executing is None


def test_an_xla_error_that_ended_a_thread_is_the_failure_though_the_program_exited_0() -> None:
    oom = "JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes."
    run = classify(f"Exception in thread evaluator:\n...\njax.errors.{oom}\n", exit_status=0)
    assert run.kind is Kind.SUCCESS  # Python printed it and went on: status 0
    thrown = Uncaught("thread 'evaluator'", "jax.errors.JaxRuntimeError", oom)
    weighed = weigh(run, failing([process(6, exited=True, exit_status=None, uncaught=(thrown,))]))
    assert weighed.kind is Kind.RUNTIME_ERROR and weighed.exit_status == 0
    assert weighed.headline == "RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes."
    assert "in thread 'evaluator'; Python printed it and went on" in str(weighed.evidence)
    # Raised by a compile the process recorded: a compile error, naming what it compiled.
    split = "JaxRuntimeError: INTERNAL: Too many extra compilation parts due to non-default"
    compiled = Event("compile", 1, "jit_eval", 3, fun="jit(eval)", started=1, ended=2, error=split)
    at_exit = Uncaught("an atexit function", "jax.errors.JaxRuntimeError", split)
    weighed = weigh(run, failing([process(6, compiled, exited=True, uncaught=(at_exit,))]))
    assert weighed.kind is Kind.COMPILE_ERROR and weighed.compiling == "eval"
    # A Python error that ended a thread is the program's own: the run stays a success.
    value = Uncaught("thread 'loader'", "builtins.ValueError", "ValueError: bad batch")
    assert weigh(run, failing([process(6, exited=True, uncaught=(value,))])) == run


def test_a_worker_that_ended_inside_a_compile_with_no_exception_crashed_there() -> None:
    # LLVM's option parser exits 1 on a misspelled --xla_backend_extra_options: the worker
    # leaves no exception, no fatal signal and no exit of Python's; its parent sums up.
    run = classify("sweep: best 0.00000 mean 2.00838; failed: ['unrolled']\n", exit_status=1)
    assert run.kind is Kind.EXIT
    worker = process(7, compiling(1, "convert_element_type"))
    weighed = weigh(run, failing([process(6, exited=True, exit_status=1), worker]))
    assert weighed.kind is Kind.COMPILE_CRASH and weighed.message_lost
    assert weighed.compiling == "convert_element_type"
    assert "never returned: the process ended inside the compile" in str(weighed.evidence)
    assert str(weighed.evidence).endswith("the run itself ended with: sweep: best 0.00000 "
                                          "mean 2.00838; failed: ['unrolled']")  # fmt: skip
    # One that exited as Python does, after the compile it was in, is not read so.
    done = process(7, compiling(1, "convert_element_type"), exited=True, exit_status=1)
    assert weigh(run, failing([process(6, exited=True, exit_status=1), done])).kind is Kind.EXIT


def test_a_program_that_ended_itself_while_the_device_computed_a_call_hung_in_it() -> None:
    """A watchdog's os._exit while a worker thread waited on a jitted result: the call's
    dispatch had returned, its outputs were never ready."""
    watchdog = "watchdog: request lr-range-test still running after 20 s, exiting"
    failure = classify(f"{watchdog}\n", exit_status=75)
    assert failure.kind is Kind.EXIT
    hung = replace(running(3, "lr_range_test"), started=100.0, on_device=True)
    p = process(7, running(1, "warmup", ended=1.5), hung)
    weighed = weigh(failure, failing([p]), ended_at=121.0)
    assert weighed.kind is Kind.HANG and weighed.executing == "lr_range_test"
    assert weighed.stalled_seconds == 21.0  # what the replay waits for, and a minute more
    assert weighed.headline.startswith("XLA was still executing jit(lr_range_test) for 21 s")
    assert "its outputs were still not computed 21 s later" in (weighed.evidence or "")
    # A call whose outputs were ready is no hang: the program's own exit stands.
    done = replace(hung, ended=101.0, on_device=False)
    assert weigh(failure, failing([process(7, done)]), ended_at=121.0).kind is Kind.EXIT


def test_an_error_raised_in_the_programs_own_callback_stays_the_programs() -> None:
    output = (
        "jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error calling callback: Traceback "
        "(most recent call last):\n"
        '  File "/home/u/calibrate.py", line 67, in main\n'
        '  File "/site/jax/_src/callback.py", line 71, in __call__\n'
        '  File "/home/u/calibrate.py", line 46, in lookup_calibration\n'
        "KeyError: 7\n"
    )
    failure = classify(output, exit_status=1)
    assert failure.kind is Kind.EXIT and failure.exception == "KeyError"
    assert failure.callback == "lookup_calibration (calibrate.py:46)"
    assert failure.headline == (
        "KeyError: 7, raised in the program's host callback lookup_calibration (calibrate.py:46)"
    )
    # The hook recorded XLA's status as the call's error: the program's exception stands.
    raised = replace(running(2, "calibrate_batch", ended=2.5), error="JaxRuntimeError: INTERNAL")
    assert weigh(failure, failing([process(7, raised)])) == failure
    # A jitted call that failed inside the callback is XLA's to answer for.
    nested = output.replace("KeyError: 7", "jax.errors.JaxRuntimeError: INTERNAL: boom")
    assert classify(nested, exit_status=1).kind is Kind.RUNTIME_ERROR


def test_a_stop_from_outside_gets_how_long_the_hung_call_had_run() -> None:
    """SIGTERM from a wrapper (``timeout 600 python ...``): collect measured no stall, so the
    replay waits as long as the call had run, and a minute more, not the full limit."""
    failure = classify("solving again to a residual of 1e-09\n", exit_status=124)
    stack = 'Current thread 0x01 (most recent call first):\n  File "/home/u/solve.py", line 51\n'
    p = process(7, replace(running(2, "solve"), started=50.0), stack=stack)
    weighed = weigh(failure, failing([p]), ended_at=290.0)
    assert weighed.kind is Kind.HANG and weighed.stopped_by == "signal"
    assert weighed.stalled_seconds == 240.0
    assert weighed.replay_timeout(300.0) == 300.0
    early = weigh(failure, failing([p]), ended_at=80.0)
    assert early.replay_timeout(300.0) == 30.0 + HANG_REPLAY_START_SECONDS


STACKS = Path(__file__).parents[1] / "failure" / "data" / "stacks"


def test_a_program_that_ended_itself_inside_a_call_xla_ran_inline_hung_in_it() -> None:
    """A small computation XLA's CPU client runs inside the call (tests/programs/
    watchdog_exit_hang.py): the call never returned, no ``executed`` record, and the
    watchdog's os._exit ended the process there."""
    said = "ERROR recalibration: recalibration exceeded the 20s SLA, restarting the service"
    failure = classify(f"2026-12-06 14:34:04,696 {said}\n", exit_status=75)
    assert failure.kind is Kind.EXIT
    inline = replace(running(3, "recalibrate"), started=100.0)  # no executed, not on device
    weighed = weigh(failure, failing([process(7, inline)]), ended_at=120.0)
    assert weighed.kind is Kind.HANG and weighed.executing == "recalibrate"
    assert weighed.headline.startswith("XLA was still executing jit(recalibrate) for 20 s")
    assert weighed.evidence == (
        "pid 7 called jit(recalibrate), which XLA ran inside the call, and the call had still "
        "not returned 20 s later, when the process ended on its own (no exit of Python's, no "
        "fatal signal)"
    )
    # A process that left through Python's own exit was not ended inside the call.
    exited = process(7, inline, exited=True, exit_status=75)
    assert weigh(failure, failing([exited]), ended_at=120.0).kind is Kind.EXIT


@pytest.mark.parametrize(
    ("excerpt", "callback", "call"),
    [
        ("pure_callback_sleeping.txt", "fetch_gain (callback_sleep_hang.py:30)", "calibrate"),
        ("io_callback_waiting_on_event.txt", "log_metrics (callback_event_hang.py:31)", "step"),
    ],
)
def test_a_stop_inside_the_programs_own_callback_is_the_programs_hang(
    excerpt: str, callback: str, call: str
) -> None:
    stop = Stop(by="timeout", ran=40.0, stalled=37.0)
    stopped = classify("calibrating\n", exit_status=-15, timed_out=True, stop=stop)
    stack = (STACKS / excerpt).read_text()
    weighed = weigh(stopped, failing([process(7, running(2, call), stack=stack)]))
    assert weighed.kind is Kind.HANG and weighed.callback == callback
    assert weighed.exception is None and weighed.executing == call
    assert weighed.headline == (
        f"the program's own host callback {callback} was running in jit({call}) with no "
        "output for 37 s; killed by the timeout after 40 s"
    )
    assert weighed.evidence == (
        f"pid 7's Python stack at the stop shows a thread inside the program's own host "
        f"callback {callback}, which jax called in jit({call}): XLA was waiting for the "
        "program's Python to return"
    )


def test_a_stop_while_xla_itself_ran_names_no_callback() -> None:
    stop = Stop(by="timeout", ran=40.0, stalled=37.0)
    stopped = classify("ready\n", exit_status=-15, timed_out=True, stop=stop)
    stack = (STACKS / "xla_executing_no_callback.txt").read_text()
    weighed = weigh(stopped, failing([process(7, running(2, "spin"), stack=stack)]))
    assert weighed.kind is Kind.HANG and weighed.callback is None
    assert weighed.headline.startswith("XLA was executing jit(spin)")


def test_a_stop_that_interrupted_the_callback_names_the_call_it_ended() -> None:
    """Ctrl-C on collect: the KeyboardInterrupt met the callback, and XLA ended the call
    with its callback error; the stack at the stop still shows the callback."""
    stop = Stop(by="user", ran=3.0, stalled=1.0)
    stopped = classify("calibrating\n", exit_status=-2, interrupted=True, stop=stop)
    error = "JaxRuntimeError: INTERNAL: CpuCallback error calling callback: Traceback (most"
    ended = replace(running(2, "calibrate", ended=3.0), error=error)
    stack = (STACKS / "pure_callback_sleeping.txt").read_text()
    weighed = weigh(stopped, failing([process(7, ended, stack=stack)]))
    assert weighed.kind is Kind.HANG and weighed.executing == "calibrate"
    assert weighed.callback == "fetch_gain (callback_sleep_hang.py:30)"
    assert weighed.headline.startswith(
        "the program's own host callback fetch_gain (callback_sleep_hang.py:30) was running in "
        "jit(calibrate)"
    )


def test_a_program_that_ended_itself_inside_its_own_callback_is_its_own_hang() -> None:
    """tests/programs/callback_watchdog_exit.py: the watchdog's os._exit while the callback
    waited; the hook wrote the stack at that exit (no signal stopped it)."""
    said = "watchdog: sensor read exceeded 10 s, exiting"
    failure = classify(f"{said}\n", exit_status=75)
    stack = (STACKS / "pure_callback_at_own_exit.txt").read_text()
    inline = replace(running(2, "fuse"), started=100.0)
    weighed = weigh(failure, failing([process(7, inline, stack=stack)]), ended_at=110.0)
    assert weighed.kind is Kind.HANG and weighed.stopped_by is None
    assert weighed.callback == "read_sensor (callback_watchdog_exit.py:28)"
    assert weighed.headline == (
        "the program's own host callback read_sensor (callback_watchdog_exit.py:28) was "
        f"running in jit(fuse) when the program ended itself ({said})"
    )
    assert weighed.evidence is not None
    assert weighed.evidence.startswith("pid 7's Python stack at its own os._exit shows")


def test_a_worker_that_aborted_in_the_programs_own_callback_crashed_there() -> None:
    """benchmarks/heldout5/tile_pipeline.py: the parent prints its worker's last words and
    exits 1; the worker's stack at its SIGABRT shows its own callback calling os.abort()."""
    run = classify(
        "pipeline aborted: tile worker for shard 2 failed (killed by SIGABRT); its last words:\n"
        "tiledec: bad magic 0x00000000 (expected 0x54494c45); aborting\n"
        "2 of 4 shards done; rerun with --resume\n",
        exit_status=1,
    )
    stack = (STACKS / "pure_callback_abort_in_worker.txt").read_text()
    worker = process(9, running(12, "tone_map"), stack=stack)
    healthy = process(8, running(1, "tone_map", ended=2.0), exited=True, exit_status=0)
    weighed = weigh(run, failing([healthy, worker]))
    assert weighed.kind is Kind.CRASH and weighed.signal == "SIGABRT"
    assert weighed.callback == "_decoder_check_header (tile_worker.py:32)"
    assert weighed.executing == "tone_map" and weighed.exception is None
    assert weighed.headline == (
        "the process died inside the program's own host callback _decoder_check_header "
        "(tile_worker.py:32) while jit(tone_map) ran it"
    )
    assert str(weighed.evidence).startswith("pid 9's Python stack at the SIGABRT shows")


def test_a_crash_in_xlas_own_code_while_no_callback_ran_names_none() -> None:
    run = classify("", exit_status=-11)
    weighed = weigh(run, failing([process(7, running(1, "step"), stack=SEGFAULT)]))
    assert weighed.kind is Kind.CRASH and weighed.callback is None
