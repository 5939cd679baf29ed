"""The run's failure, weighed against what its failing process recorded about itself.

``classify`` reads the run's output, which can lose exactly what matters: pytest's capture
swallows XLA's fatal line, a worker's death shows only as its parent's last message, two
reader threads may deliver a process's lines out of order. The hook's record of the
failing process (``processes.failing``) is written by the process itself, one line at a
time, and does not depend on any of that; where the two disagree, the record decides, and
the failure says what it rests on (``Failure.evidence``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from xla_bugkit.failure.callback import (
    callback_failed,
    crashed_in_callback,
    crashed_outside_jax,
    running_in_callback,
)
from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.failure.signature import normalise
from xla_bugkit.failure.stopped import busy_headline, seconds
from xla_bugkit.run import in_callback
from xla_bugkit.run.evidence import Event, ProcessEvidence, Uncaught
from xla_bugkit.run.hook.ending import OWN_EXIT
from xla_bugkit.run.processes import Culprit

# faulthandler's first line for each fatal signal it catches.
_FATAL_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}
_FATAL_LINE = re.compile(r"^Fatal Python error: (?P<what>[^\n]+)$", re.M)
# The line the hook writes above the stack when the program calls os._exit in a callback.
_OWN_EXIT = re.compile("^" + re.escape(OWN_EXIT).replace(r"\{status\}", r"-?\d+") + "$", re.M)


# Complex on purpose: what the process's record can say of its failure, the first that
# applies wins, read as one list.
def weigh(  # noqa: C901
    failure: Failure, culprit: Culprit | None, *, ended_at: float | None = None
) -> Failure:
    """``failure`` with what the failing process recorded: it crashed on a signal inside
    XLA (its own fatal line lost, or hidden behind a parent's exit), it was compiling or
    running a given module, or it was stopped while XLA was busy. ``ended_at``: when the
    run ended (``time.time()``), for how long a call the device never finished had run."""
    if culprit is None or failure.evidence is not None or failure.peer is not None:
        return failure  # nothing to weigh, done, or another process's failure
    p = culprit.process
    crashed = _fatal_signal(p)
    busy = p.unfinished
    if failure.stopped_by is not None:
        return _stopped(failure, busy, culprit, ended_at)
    callback = running_in_callback(p.stack or "")
    if failure.kind is Kind.EXIT and callback is not None and _OWN_EXIT.search(p.stack or ""):
        return in_callback.hung(failure, callback, busy, culprit)
    inside = bool(busy or _awaited(p) or callback)
    if KINDS[failure.kind].killed_shows_as and _signalled(p) and inside:
        # Stopped from outside collect (``timeout 600 python ...``): the same reading as
        # collect's own stop, where XLA was busy.
        return _stopped(replace(failure, stopped_by="signal"), busy, culprit, ended_at)
    if crashed is not None and (killer := crashed_in_callback(p.stack or "")) is not None:
        return in_callback.died(failure, crashed, killer, busy, culprit)
    if crashed is not None and (native := crashed_outside_jax(p.stack or "")) is not None:
        return in_callback.died_natively(failure, crashed, native, busy, culprit)
    if crashed is not None and not _captured(failure.kind):
        return _crashed(failure, crashed, busy, culprit)
    if KINDS[failure.kind].dies and busy is not None:
        return _with_busy(failure, busy)
    if failure.kind is Kind.EXIT and busy is not None and busy.kind == "compile" and not p.exited:
        return _ended_compiling(failure, busy, culprit)
    if failure.kind is Kind.EXIT and busy is not None and _still_running(busy, p):
        return _ended_running(failure, busy, culprit, ended_at)
    raised = p.raised  # the call that made the error, not a later one that met it
    # An error of the program's own host callback is the program's, whatever XLA recorded.
    if failure.kind is Kind.EXIT and raised is not None and failure.callback is None:
        caught = _caught(failure, raised, culprit)
        if KINDS[caught.kind].error_status:
            return caught
    thrown = next((u for u in reversed(p.uncaught) if u.from_jax), None)
    if failure.kind is Kind.SUCCESS and thrown is not None:
        return _went_on(failure, thrown, p, culprit)
    if KINDS[failure.kind].error_status and raised is not None and not _said_busy(failure):
        if raised.kind == "compile":
            return replace(
                failure, kind=Kind.COMPILE_ERROR, phase=Phase.COMPILE, compiling=raised.name
            )
        return replace(failure, kind=Kind.RUNTIME_ERROR, phase=Phase.RUN, executing=raised.name)
    return failure


def _captured(kind: Kind) -> bool:
    """What the run's own output may say that the record cannot improve on: XLA's error
    status, the program's own check of a wrong value."""
    return KINDS[kind].error_status or kind is Kind.WRONG_RESULT


def _fatal_signal(p: ProcessEvidence) -> str | None:
    """The signal that killed ``p``, from faulthandler's stack of it; None if none did."""
    found = _FATAL_LINE.search(p.stack or "")
    if found is None:
        return None
    what = found.group("what").strip()
    return _FATAL_SIGNALS.get(what, what)


def _signalled(p: ProcessEvidence) -> bool:
    """Whether ``p`` was stopped by a SIGTERM or SIGINT: faulthandler wrote its stack (the
    hook registers it for those two), it died on no fatal signal, and it never exited."""
    stack = p.stack
    return (
        stack is not None
        and _FATAL_LINE.search(stack) is None
        and _OWN_EXIT.search(stack) is None
        and not p.exited
    )


def _crashed(failure: Failure, signal: str, busy: Event | None, culprit: Culprit) -> Failure:
    """The failing process died on ``signal``. Its fatal line is the run's when the output
    has one; otherwise the message was not captured, and the record says what it can."""
    compiling = busy is not None and busy.kind == "compile"
    kind = Kind.COMPILE_CRASH if compiling else Kind.CRASH
    own = KINDS[failure.kind].dies and not failure.message_lost
    headline = failure.headline if own else f"killed by {signal}"
    rests_on = f"{culprit.label} died on {signal} ({culprit.why})"
    if not own and failure.kind is not Kind.SUCCESS and not failure.message_lost:
        rests_on += f"; the run's own last message was: {failure.headline[:160]}"
    weighed = replace(
        failure,
        kind=kind,
        phase=Phase.COMPILE if compiling else Phase.RUN if busy else failure.phase,
        headline=headline,
        signature=failure.signature if own else normalise(headline),
        signal=signal,
        message_lost=not own,
        exception=None if not own else failure.exception,
        evidence=rests_on,
    )
    return _with_busy(weighed, busy) if busy is not None else weighed


def _caught(failure: Failure, raised: Event, culprit: Culprit) -> Failure:
    """The XLA error the process recorded, which the program caught (logging it, say) before
    it exited with a message of its own; a failure of another kind when it was no XLA error."""
    compiling = raised.kind == "compile"
    phase = Phase.COMPILE if compiling else Phase.RUN
    caught = classify(f"{raised.error}\n", exit_status=failure.exit_status, phase=phase)
    doing = "compiling" if compiling else "running"
    return replace(
        caught,
        compiling=raised.name if compiling else None,
        executing=None if compiling else raised.name,
        evidence=f"{culprit.label} recorded that XLA raised while {doing} {raised.call}; the "
        f"program went on and ended with its own message: {failure.headline[:160]}",
    )


def _went_on(failure: Failure, thrown: Uncaught, p: ProcessEvidence, culprit: Culprit) -> Failure:
    """The XLA error that ended a thread of the process, or that an atexit function raised:
    Python printed it and went on, and the exit status says nothing of it (0)."""
    met = next((e for e in reversed(p.events) if e.error == thrown.error), None)
    raised = p.made_error(met) if met is not None else None
    phase = None if raised is None else Phase.COMPILE if raised.kind == "compile" else Phase.RUN
    found = classify(f"{thrown.error}\n", exit_status=1, phase=phase)
    if raised is not None:
        compiling = raised.kind == "compile"
        found = replace(
            found,
            compiling=raised.name if compiling else None,
            executing=None if compiling else raised.name,
        )
    return replace(
        found,
        exit_status=failure.exit_status,
        signal=failure.signal,
        evidence=f"{culprit.label} recorded an uncaught {thrown.error[:160]} in {thrown.where}; "
        f"Python printed it and went on, and the program exited with status "
        f"{failure.exit_status}",
    )


def _ended_compiling(failure: Failure, busy: Event, culprit: Culprit) -> Failure:
    """A process whose record ends inside a compilation, with no exception, no fatal signal
    and no exit of Python's own: it ended there (LLVM's option parser exits 1 on an
    unknown ``--xla_backend_extra_options``), and what the run printed last is someone
    else's (a parent's summary). Its message did not reach collect as its own: the replay's
    stands in for it once it fails the same way."""
    return replace(
        failure,
        kind=Kind.COMPILE_CRASH,
        phase=Phase.COMPILE,
        headline=f"{culprit.label} ended while XLA was compiling {busy.call}",
        signature="compile crash",
        compiling=busy.name,
        message_lost=True,
        evidence=f"{culprit.label} recorded that XLA was compiling {busy.call} and never "
        "returned: the process ended inside the compile, with no exception and no fatal "
        f"signal; the run itself ended with: {failure.headline[:160]}",
    )


def _still_running(busy: Event, p: ProcessEvidence) -> bool:
    """Whether the execution ``busy`` was still running when ``p`` ended: the device was
    computing it after its dispatch returned, or (a small computation XLA's CPU client runs
    inline, inside the call) the call never returned in a process that ended without
    Python's own exit (``os._exit``)."""
    return busy.kind == "execute" and (busy.on_device or not p.exited)


def _ended_running(
    failure: Failure, busy: Event, culprit: Culprit, ended_at: float | None
) -> Failure:
    """A process that ended itself (``os._exit`` from its own watchdog, say) while XLA was
    still computing a call: whatever thread waited on it, the call was running, so this is
    a hang in XLA until a replay shows the call ends."""
    call = busy.call
    running = max(ended_at - busy.started, 0.0) if ended_at is not None else None
    during = f" for {seconds(running)}" if running is not None else ""
    later = f" {seconds(running)} later," if running is not None else ","
    return replace(
        failure,
        kind=Kind.HANG,
        phase=Phase.RUN,
        headline=f"XLA was still executing {call}{during} when the program ended itself "
        f"({failure.headline[:120]})",
        signature="hang",
        executing=busy.name,
        stalled_seconds=round(running, 1) if running is not None else None,
        evidence=f"{culprit.label} dispatched {call}, and its outputs were still not computed"
        f"{later} when the process ended on its own (no exit of Python's, no fatal signal): "
        "the thread that waited for them never got them"
        if busy.on_device
        else f"{culprit.label} called {call}, which XLA ran inside the call, and the call had "
        f"still not returned{later} when the process ended on its own (no exit of Python's, "
        "no fatal signal)",
    )


def _with_busy(failure: Failure, busy: Event) -> Failure:
    """``failure`` naming the compilation or execution its process never finished."""
    name = busy.name
    if busy.kind == "compile":
        return replace(failure, phase=Phase.COMPILE, compiling=name, kind=_compile_kind(failure))
    return replace(failure, phase=Phase.RUN, executing=name, compiling=None, kind=Kind.CRASH)


def _compile_kind(failure: Failure) -> Kind:
    return Kind.COMPILE_CRASH if KINDS[failure.kind].dies else failure.kind


# faulthandler's frame of a thread waiting for an array's value, which an execution
# dispatched earlier computes (dispatch returns at once): reading it to the host, or
# block_until_ready.
_WAITING = re.compile(
    r'^\s*File "[^"\n]*jax/_src/(?:array|api)\.py", line \d+ in (?:_value|__array__|'
    r"block_until_ready|__float__|__int__|__bool__|__index__|__complex__|item|tolist|"
    r"_single_device_array_to_np_array\w*)$",
    re.M,
)


def _awaited(p: ProcessEvidence) -> Event | None:
    """The execution a stopped process was waiting on: its last one, where its stack at the
    stop shows a thread waiting for an array's value. Execution is asynchronous: the
    dispatch had returned, and the hook saw nothing under way."""
    if not p.stack or _WAITING.search(p.stack) is None:
        return None
    return next((e for e in reversed(p.events) if e.kind == "execute"), None)


def _stopped(
    failure: Failure, busy: Event | None, culprit: Culprit, ended_at: float | None = None
) -> Failure:
    """A run stopped by its timeout or by the user: a hang when the failing process had a
    compilation or execution under way, whatever the order its output lines arrived in, or
    was waiting for the result of its last execution. A stop with no figure of its own (a
    signal from outside collect) is given how long that call had run by ``ended_at``."""
    # A process that answered collect's question before the stop said what it waited for;
    # its stack alone (a loop caught reading a value) is weaker evidence than that.
    p = culprit.process
    awaited = _awaited(p) if busy is None and not p.answered else None
    event = busy or awaited
    if (callback := running_in_callback(p.stack or "")) is not None:
        # A stop that interrupted the callback ended its execution with XLA's callback error.
        raised = next((e for e in reversed(p.events) if callback_failed(e.error or "")), None)
        return in_callback.hung(failure, callback, event or raised, culprit)
    if event is None:
        if failure.kind is Kind.HANG and failure.stopped_by == "user" and _said_busy(failure):
            # The output's compile log said busy; the process's own record says it had
            # finished every compilation and execution it started.
            return replace(
                failure,
                kind=Kind.INTERRUPTED,
                headline="stopped by the user",
                signature="interrupted",
                evidence=f"{culprit.label} had no compilation or execution under way",
            )
        return failure
    doing = "compiling" if event.kind == "compile" else "executing"
    name, call = event.name, event.call
    unread = "; its arguments could not be read" if event.seen and event.args is None else ""
    rests_on = (
        f"{culprit.label} was {doing} {call} when it was stopped: {event.seen}{unread}"
        if event.seen
        else f"{culprit.label} recorded that it was {doing} {call} when it was stopped"
        if awaited is None
        else f"{culprit.label} was waiting for the result of {call}, its last execution, "
        "when it was stopped (its stack at the stop)"
    )
    stalled = failure.stalled_seconds
    if stalled is None and ended_at is not None and event.started and not event.seen:
        stalled = round(max(ended_at - event.started, 0.0), 1)  # how long the call had run
    return replace(
        failure,
        kind=Kind.HANG,
        stalled_seconds=stalled,
        unread_inputs=bool(event.seen) and event.args is None,
        phase=Phase.COMPILE if event.kind == "compile" else Phase.RUN,
        headline=busy_headline(f"XLA was {doing} {call}", failure),
        signature="hang",
        compiling=name if event.kind == "compile" else failure.compiling,
        executing=None if event.kind == "compile" else name,
        evidence=rests_on,
    )


def _said_busy(failure: Failure) -> bool:
    return failure.compiling is not None or failure.executing is not None
