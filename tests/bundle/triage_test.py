"""The triage of a failure from the replay's evidence: a wrong value the program's own check
found, and where a crash happened."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from xla_bugkit.bundle.triage import of_run, triage
from xla_bugkit.bundle.wording import sentence, title
from xla_bugkit.failure.classify import Failure, Kind, Phase, Stop, classify
from xla_bugkit.run.evidence import Event, ProcessEvidence
from xla_bugkit.run.processes import failing
from xla_bugkit.run.weigh import weigh
from xla_bugkit.verdict import Outcome, Verdict

CHECKED = Failure(
    kind=Kind.WRONG_RESULT,
    phase=Phase.UNKNOWN,
    headline="AssertionError: Not equal to tolerance rtol=1e-09, atol=0",
    signature="AssertionError: Not equal to tolerance",
    exit_status=1,
    exception="AssertionError",
)


def agreed(inputs: str = "snapshot") -> Verdict:
    return Verdict(
        "module_0004.jit_running_mean",
        Outcome.NOT_REPRODUCED,
        "ran to completion; result agrees with op-by-op, conservative flags",
        inputs,
        numbers={"reference": "op-by-op, conservative flags"},
    )


def test_a_replay_on_the_recorded_inputs_that_agrees_points_at_the_module_as_lowered() -> None:
    judged = triage(CHECKED, [agreed()])
    assert not judged.xla
    assert judged.reason.startswith(
        "the program's own check found a wrong value, but XLA computes jit(running_mean) on "
        "the recorded inputs as its references do (op-by-op, conservative flags)"
    )
    assert "a wrong op that the references share would not show here" in judged.reason


def test_the_checks_own_note_follows() -> None:
    noted = Failure(**{**CHECKED.__dict__, "check_note": "the check's largest ... epsilon"})
    assert triage(noted, [agreed()]).reason.endswith("; the check's largest ... epsilon")


def test_generated_inputs_prove_nothing_about_the_programs_values() -> None:
    judged = triage(CHECKED, [agreed("generated (seed 42)")])
    assert "as JAX lowered it" not in judged.reason
    assert judged.reason.endswith("did not reproduce it")


def test_a_replay_that_computed_no_reference_proves_no_agreement() -> None:
    nothing = Verdict(
        "module_0004.jit_running_mean",
        Outcome.NOT_REPRODUCED,
        "ran to completion; result agrees with no reference",
        "snapshot",
        numbers={"reference": "no reference"},
    )
    judged = triage(CHECKED, [nothing])
    assert "as JAX lowered it" not in judged.reason
    assert judged.reason.endswith("did not reproduce it")


def test_a_crash_is_placed_where_its_replay_reproduces_it() -> None:
    """The main thread waited on jit(diagnostics) while jit(collide), which it depends on,
    crashed in the background: the hook recorded the one, the replay reproduced the other."""
    crashed = Failure(
        kind=Kind.CRASH,
        phase=Phase.RUN,
        headline="killed by SIGSEGV",
        signature="killed by SIGSEGV",
        signal="SIGSEGV",
        executing="diagnostics",
    )
    verdicts = [
        Verdict("module_0016.jit_diagnostics", Outcome.NOT_REPRODUCED, "ran to completion", "x"),
        Verdict("module_0014.jit_collide", Outcome.REPRODUCED_CRASH, "crash (SIGSEGV)", "x"),
    ]
    judged = triage(crashed, verdicts)
    assert judged.where == "jit(collide)"
    assert title(judged, crashed, "cpu") == "XLA CPU crash (SIGSEGV) while running jit(collide)"
    assert sentence(judged, crashed) == "The process dies (SIGSEGV) while running `jit(collide)`."
    # Where the replay agrees with the record, or nothing reproduced, the record stands.
    assert triage(crashed, verdicts[:1]).where == "jit(diagnostics)"
    same = [Verdict("module_0016.jit_diagnostics", Outcome.REPRODUCED_CRASH, "crash", "x")]
    assert triage(crashed, same).where == "jit(diagnostics)"


STOPPED_IN_XLA = Failure(
    kind=Kind.HANG,
    phase=Phase.RUN,
    headline="the program was stopped after the timeout (15 s)",
    signature="the program was stopped after the timeout",
    stopped_by="timeout",
    executing="newton",
)
REFUSED = Verdict(
    "module_0046.jit_newton",
    Outcome.NOT_REPLAYABLE,
    "the module calls back into Python (custom-call xla_ffi_python_cpu_callback)",
    "",
)


def test_a_replay_that_could_not_run_does_not_clear_a_module_xla_was_running() -> None:
    judged = triage(STOPPED_IN_XLA, [REFUSED])
    assert judged.xla
    assert "did not hang" not in judged.reason
    assert judged.reason == (
        "XLA was running jit(newton) when it stopped (the replay of module_0046.jit_newton "
        "could not run: the module calls back into Python (custom-call "
        "xla_ffi_python_cpu_callback))"
    )
    ran = Verdict("module_0046.jit_newton", Outcome.NOT_REPRODUCED, "ran to completion", "snapshot")
    assert not triage(STOPPED_IN_XLA, [REFUSED, ran]).xla  # one that ran and did not hang


def test_nothing_ran_is_not_said_as_not_reproduced() -> None:
    failed = Failure(
        kind=Kind.EXIT, phase=Phase.UNKNOWN, headline="RuntimeError: boom", signature="x"
    )
    reason = triage(failed, [REFUSED]).reason
    assert "did not reproduce" not in reason
    assert reason.endswith(
        "no replay ran to show otherwise (the replay of module_0046.jit_newton could not run: "
        "the module calls back into Python (custom-call xla_ffi_python_cpu_callback))"
    )


def test_the_title_keeps_the_numbers_the_signature_stands_n_for() -> None:
    oom = Failure(
        kind=Kind.RUNTIME_ERROR,
        phase=Phase.RUN,
        headline="RESOURCE_EXHAUSTED: Out of memory allocating 1890253528 bytes.",
        signature="RESOURCE_EXHAUSTED: Out of memory allocating N bytes.",
        status_code="RESOURCE_EXHAUSTED",
    )
    proof = Verdict("module_0001.jit_f", Outcome.REPRODUCED_ERROR, oom.headline, "snapshot")
    judged = triage(oom, [proof])
    assert title(judged, oom, "cpu") == (
        "XLA CPU runtime error: RESOURCE_EXHAUSTED: Out of memory allocating 1890253528 bytes."
    )
    # Not reproduced outside the program: no "XLA" ahead, and the number kept whole.
    unproven = title(triage(oom, []), oom, "cpu")
    assert unproven == (
        "CPU runtime error: RESOURCE_EXHAUSTED: Out of memory allocating… (not shown to be "
        "XLA's yet)"
    )
    # A headline that does not line up with its signature is quoted as the run printed it.
    odd = Failure(**{**oom.__dict__, "headline": "INTERNAL: Error dispatching computation: "
                     "Out of memory allocating 7 bytes."})  # fmt: skip
    assert title(triage(odd, [proof]), odd, "cpu").endswith(
        "INTERNAL: Error dispatching computation: Out of memory allocating 7 bytes."
    )


def test_a_long_title_is_cut_at_a_word_not_inside_one() -> None:
    from xla_bugkit.bundle.issue import title_for

    ret_check = (
        'INTERNAL: RET_CHECK failure (spmd_partitioner.cc:6456) hlo->custom_call_target().rfind("'
        'xla.sdy", 0) != 0 This is a custom call named xla.sdy.* which should not appear'
    )
    cut = title_for("compile error", ret_check, platform="cpu")
    assert cut.startswith("XLA CPU compile error: ")
    assert cut.endswith("… (spmd_partitioner.cc:6456)")
    assert '("x…' not in cut and " …" not in cut


def test_a_stop_with_nothing_found_under_way_says_it_is_the_hook_that_found_nothing() -> None:
    stopped = Failure(
        kind=Kind.HANG,
        phase=Phase.UNKNOWN,
        headline="the program was stopped after the timeout (15 s)",
        signature="the program was stopped after the timeout",
        stopped_by="timeout",
    )
    reason = triage(stopped, []).reason
    assert "XLA was not busy" not in reason
    assert "no compilation or execution under way that the capture hook found" in reason


def test_a_hang_in_a_call_whose_inputs_were_unread_is_not_ruled_out_by_another_calls() -> None:
    """The hook found the hung call at the stop but could not read its arguments: the replay
    on the first call's inputs finishing proves nothing about the call that hung."""
    hung = Failure(
        kind=Kind.HANG,
        phase=Phase.RUN,
        headline="XLA was executing jit(solve) with no output for 80 s",
        signature="hang",
        stopped_by="timeout",
        executing="solve",
        evidence="pid 7 was executing jit(solve) when it was stopped: its thread was inside "
        "the call solve(*batch) at train.py:40; its arguments could not be read",
        unread_inputs=True,
    )
    finished = Verdict("module_0006.jit_solve", Outcome.NOT_REPRODUCED, "ran to completion", "x")
    t = triage(hung, [finished])
    assert t.xla
    assert t.reason.startswith("pid 7 was executing jit(solve) when it was stopped")
    assert "ran on inputs recorded from an earlier call" in t.reason
    assert "neither confirms it nor rules it out" in t.reason
    # With the hung call's own inputs, a replay that finishes does speak against XLA.
    read = triage(replace(hung, unread_inputs=False), [finished])
    assert not read.xla and "did not hang" in read.reason


def test_a_title_keeps_the_message_behind_repeated_wrappers() -> None:
    """The status reached Python wrapped five times; the signature dropped the wrappers, and
    the title names what ran out, with its number."""
    wrapped = "Error dispatching computation: " * 5
    oom = Failure(
        kind=Kind.RUNTIME_ERROR,
        phase=Phase.RUN,
        headline=f"INTERNAL: {wrapped}Out of memory allocating 2048064016 bytes.",
        signature="INTERNAL: Out of memory allocating N bytes.",
        status_code="INTERNAL",
    )
    reproduced = Verdict("module_0044.jit_fit", Outcome.REPRODUCED_ERROR, "RESOURCE_EXHAUSTED", "x")
    t = triage(oom, [reproduced])
    assert title(t, oom, "cpu") == (
        "XLA CPU runtime error: Out of memory allocating 2048064016 bytes."
    )


def _out_of_memory(size: int) -> Failure:
    """The failure a run that XLA could not give ``size`` bytes shows as."""
    return Failure(
        kind=Kind.RUNTIME_ERROR,
        phase=Phase.RUN,
        headline=f"INTERNAL: Error dispatching computation: Out of memory allocating {size} bytes.",
        signature="INTERNAL: Out of memory allocating N bytes.",
        status_code="INTERNAL",
    )


def test_an_allocation_larger_than_the_programs_own_cap_is_not_called_xlas_bug() -> None:
    oom = _out_of_memory(4384032004)
    # The replay under the same cap fails the same way: that proves nothing of XLA.
    reproduced = Verdict("module_0024.jit_kde", Outcome.REPRODUCED_ERROR, "RESOURCE_EXHAUSTED", "x")
    capped = triage(oom, [reproduced], memory_cap=3 << 30)
    assert not capped.xla
    assert capped.reason.startswith(
        "XLA could not allocate 4,384,032,004 bytes in one piece under the 3,221,225,472-byte "
        "address-space cap (RLIMIT_AS) the program set itself"
    )
    # Under a cap it fits, or with none, the replay stands as proof.
    assert triage(oom, [reproduced], memory_cap=8 << 30).xla
    assert triage(oom, [reproduced]).xla


def test_an_allocation_larger_than_the_machines_memory_is_not_called_xlas_bug() -> None:
    # A 4 TiB result asked for on a CPU with 24 GiB of RAM and 2 of swap.
    oom = _out_of_memory(4398046511104)
    reproduced = Verdict("module_0014.jit_heat_map", Outcome.REPRODUCED_ERROR, "OOM", "x")
    judged = triage(oom, [reproduced], host_memory=26 << 30)
    assert not judged.xla
    assert judged.reason.startswith(
        "XLA could not allocate 4,398,046,511,104 bytes in one piece, more than the "
        "27,917,287,424 bytes of RAM and swap of the machine it ran on"
    )
    # One that fits in the machine's memory, or an accelerator's (no host memory given):
    # the replay stands as proof.
    fits = replace(oom, headline="RESOURCE_EXHAUSTED: Out of memory allocating 8589934592 bytes.")
    assert triage(fits, [reproduced], host_memory=26 << 30).xla
    assert triage(oom, [reproduced]).xla


STACKS = Path(__file__).parents[1] / "failure" / "data" / "stacks"
CALLBACK_REFUSED = Verdict(
    "module_0002.jit_calibrate",
    Outcome.NOT_REPLAYABLE,
    "the module calls back into Python (custom-call xla_ffi_python_cpu_callback); host "
    "callbacks cannot run outside the original process",
    "",
)


def _stopped_in_callback() -> Failure:
    """tests/programs/callback_sleep_hang.py stopped by collect's timeout, weighed against its
    process's real stack at the stop."""
    stop = Stop(by="timeout", ran=40.0, stalled=37.0)
    stopped = classify("calibrating\n", exit_status=-15, timed_out=True, stop=stop)
    busy = Event("execute", 2, "jit_calibrate", 1, started=2.0)
    stack = (STACKS / "pure_callback_sleeping.txt").read_text()
    p = ProcessEvidence(7, 1, ("python",), (busy,), platform="cpu", stack=stack)
    return weigh(stopped, failing([p]))


def test_a_hang_inside_the_programs_own_callback_is_not_called_xlas() -> None:
    f = _stopped_in_callback()
    judged = triage(f, [CALLBACK_REFUSED])
    assert not judged.xla and judged.what == "hang" and judged.where == "jit(calibrate)"
    assert judged.reason == (
        "the program's own host callback fetch_gain (callback_sleep_hang.py:30) was running in "
        "jit(calibrate) when it was stopped: not XLA's. XLA was only waiting for the "
        "callback's Python to return (the process's Python stack at the stop shows the "
        "callback running), so look at what the callback waits for; no replay ran: "
        "the replay of module_0002.jit_calibrate could not run (the module calls back into "
        "Python (custom-call xla_ffi_python_cpu_callback); host callbacks cannot run outside "
        "the original process)"
    )
    assert "did not reproduce" not in judged.reason
    assert title(judged, f, "cpu") == (
        "The program's own callback fetch_gain hangs in jit(calibrate) (no sign of an XLA bug)"
    )
    assert sentence(judged, f).startswith("**This does not look like an XLA bug:** the program")


def test_an_abort_inside_the_programs_own_callback_is_not_called_xlas() -> None:
    """tests/programs/callback_abort.py: no fatal line in the output (the hook keeps
    faulthandler's stack), the process's real stack at its SIGABRT shows the callback."""
    died = classify("framedec: bad magic 0x00000000; aborting\n", exit_status=-6)
    busy = Event("execute", 16, "jit_normalise", 15, started=2.0)
    stack = (STACKS / "pure_callback_abort.txt").read_text()
    p = ProcessEvidence(7, 1, ("python",), (busy,), platform="cpu", stack=stack)
    f = weigh(died, failing([p]))
    refused = replace(CALLBACK_REFUSED, module="module_0014.jit_normalise")
    judged = triage(f, [refused])
    assert not judged.xla and judged.what == "process crash" and judged.where == "jit(normalise)"
    assert judged.reason.startswith(
        "the process died on SIGABRT inside the program's own host callback _check_header "
        "(callback_abort.py:25) while jit(normalise) ran it: not XLA's."
    )
    assert "no replay ran: the replay of module_0014.jit_normalise could not run" in judged.reason
    assert title(judged, f, "cpu") == (
        "The program's own callback _check_header dies on SIGABRT in jit(normalise) "
        "(no sign of an XLA bug)"
    )
    assert "XLA CPU crash" not in title(judged, f, "cpu")
    assert sentence(judged, f).startswith("**This does not look like an XLA bug:** the process")


HUNG_REPLAY = Verdict(
    "module_0006.jit_recalibrate",
    Outcome.NOT_REPRODUCED,
    "no result after 40 s while running (a hang, though non-XLA failure was expected)",
    "snapshot",
    classify("", exit_status=-9, timed_out=True, phase=Phase.RUN),
)
WATCHDOG = "2026-12-06 14:34:04,696 ERROR recalibration: recalibration exceeded the 20s SLA"


def test_a_replay_that_hangs_outweighs_the_programs_own_ending() -> None:
    """The program ended itself (its watchdog's os._exit) with words of its own, and nothing
    of its record said XLA was busy; the module's replay never finished."""
    own = classify(f"{WATCHDOG}\n", exit_status=75)
    assert own.kind is Kind.EXIT
    judged = triage(own, [HUNG_REPLAY])
    assert judged.xla and judged.what == "hang" and judged.verdict is HUNG_REPLAY
    assert judged.reason == (
        # Its log's time is not part of it (the same failure at another time reads alike).
        f"the program ended itself with its own message ({WATCHDOG[24:]}), but the replay of "
        "module_0006.jit_recalibrate (snapshot inputs) never finishes either: the module "
        "hangs without the program, which outweighs the program's own words"
    )
    assert title(judged, own, "cpu") == "XLA CPU hang in jit(recalibrate)"
    assert sentence(judged, own) == (
        "The program hangs in `jit(recalibrate)`: it ended itself (exit status 75)."
    )


def test_a_reproduced_hang_says_what_it_rests_on() -> None:
    said = "XLA was still executing jit(recalibrate) for 20 s when the program ended itself"
    hang = Failure(Kind.HANG, Phase.RUN, said, "hang", exit_status=75, executing="recalibrate")
    proof = replace(HUNG_REPLAY, outcome=Outcome.REPRODUCED_HANG,
                    evidence="no result after 40 s while running")  # fmt: skip
    judged = triage(hang, [proof])
    assert judged.xla and judged.verdict is proof
    assert judged.reason == (
        "the replay of module_0006.jit_recalibrate hangs as well (no result after 40 s while "
        "running): the module does not finish outside the program either"
    )
    assert sentence(judged, hang) == (
        "The program hangs in `jit(recalibrate)`: it ended itself (exit status 75) while XLA "
        "still ran."
    )


def test_xla_busy_at_the_end_is_never_said_not_busy() -> None:
    ended = Failure(Kind.EXIT, Phase.RUN, WATCHDOG, WATCHDOG, exit_status=75,
                    executing="recalibrate")  # fmt: skip
    ran = Verdict("module_0006.jit_recalibrate", Outcome.NOT_REPRODUCED, "ran to completion",
                  "snapshot")  # fmt: skip
    reason = triage(ended, [ran]).reason
    assert "XLA was not busy" not in reason
    assert "XLA was running jit(recalibrate) at the end" in reason


def test_a_process_that_exited_with_xla_still_running_is_not_said_not_busy() -> None:
    """sys.exit(3) in the main thread while a worker thread was inside jit(solve): Python's
    own exit, so the record leaves the failure the program's, but XLA was busy."""
    from tests.helpers.programs import run_record

    own = classify("giving up: solver too slow\n", exit_status=3)
    busy = Event("execute", 4, "jit_solve", 2, fun="jit(solve)", started=4.0)
    p = ProcessEvidence(7, 1, ("python",), (busy,), platform="cpu", exited=True, exit_status=3)
    run = run_record("giving up: solver too slow\n", own, exit_status=3, culprit=failing([p]))
    ran = Verdict("module_0004.jit_solve", Outcome.NOT_REPRODUCED, "ran to completion", "x")
    reason = of_run(run, [ran]).reason
    assert "XLA was not busy" not in reason
    assert "the capture hook saw XLA executing jit(solve) as the process ended" in reason
    idle = replace(run, culprit=failing([replace(p, events=(replace(busy, ended=5.0),))]))
    assert "XLA was not busy at the end" in of_run(idle, [ran]).reason


def _hung_replay(busy: float) -> Verdict:
    """A replay its bound stopped, the CPU cores it kept busy in its last seconds measured."""
    return replace(HUNG_REPLAY, outcome=Outcome.REPRODUCED_HANG, numbers={"busy": busy},
                   evidence="no result after 64.3 s while running")  # fmt: skip


def test_a_replay_that_ran_past_its_bound_computing_proves_no_hang() -> None:
    """A loop whose condition never turns false, or one longer than the bound, keeps its
    replay computing: no proof of XLA's hang, no link, no "XLA" in the title."""
    said = "XLA was still executing jit(recalibrate) for 20 s when the program ended itself"
    hang = Failure(Kind.HANG, Phase.RUN, said, "hang", exit_status=75, executing="recalibrate")
    judged = triage(hang, [_hung_replay(0.93)])
    assert judged.xla and judged.unproven and not judged.proven and judged.verdict is None
    assert judged.reason.startswith(
        "the replay of module_0006.jit_recalibrate gave no result in its time either, but it "
        "was computing all along (0.93 CPU cores busy in its last seconds), not waiting"
    )
    assert "a loop whose condition never turns false" in judged.reason
    assert title(judged, hang, "cpu") == "CPU hang (not shown to be XLA's yet)"
    assert sentence(judged, hang).startswith("**Not shown to be an XLA bug yet:** the replay")
    # Where the program ended itself, a busy replay does not outweigh its own words either.
    own = classify(f"{WATCHDOG}\n", exit_status=75)
    assert triage(own, [_hung_replay(0.93)]).verdict is None


def test_a_replay_that_waits_idle_past_its_bound_proves_the_hang() -> None:
    said = "XLA was still executing jit(recalibrate) for 20 s when the program ended itself"
    hang = Failure(Kind.HANG, Phase.RUN, said, "hang", exit_status=75, executing="recalibrate")
    idle = _hung_replay(0.0)
    judged = triage(hang, [idle])
    assert judged.proven and judged.verdict is idle
    assert title(judged, hang, "cpu") == "XLA CPU hang in jit(recalibrate)"
