"""Does a failure point at XLA, and how should its report name what happened?

Both the issue text (title, description) and collect's summary read one ``Triage``, said in
words by ``wording``, so the two never disagree on whether a run looks like an XLA bug. The
decision reads only the failure record and the replay verdicts: a CHECK/RET_CHECK site, an
XLA status code or exception type, a crash signal while JAX compiled or ran, a run stopped
while XLA was compiling or running (unless a replay of the module ran without hanging, or the
program's own host callback was running), or a replay that reproduced the failure without the
original program, which outweighs what the program said of its own end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from xla_bugkit.bundle import excused, pallas
from xla_bugkit.failure import jax_use
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.failure.pytraceback import XLA_EXCEPTION
from xla_bugkit.hlo.names import function_name, module_name
from xla_bugkit.run.record import RunRecord
from xla_bugkit.verdict import NO_REFERENCE, Outcome, Verdict

# Signals a program gets from outside (the user, a supervisor, the OOM killer), not from a
# fault of its own: they say nothing about XLA.
_OUTSIDE_SIGNALS = frozenset({"SIGINT", "SIGTERM", "SIGKILL", "SIGHUP", "SIGPIPE", "SIGQUIT"})


@dataclass(frozen=True)
class Triage:
    """What happened, where, and whether anything points at XLA (``reason`` says why)."""

    xla: bool
    what: str  # "wrong result", "hang", "compile crash", ..., or the failure's own kind
    where: str | None  # "jit(f)": the function JAX was compiling or the replayed module's
    reason: str  # one line: the evidence for XLA, or why nothing points at it
    verdict: Verdict | None = None  # the replay that reproduced the failure, if one did

    @property
    def proven(self) -> bool:
        """XLA is named (the title, "an XLA bug", an issue link, exit 0) only here: what
        points at XLA, and a replay outside the program, on what the bundle holds, that
        reproduced the failure. Pointing at XLA without that replay is "unproven"."""
        return self.xla and self.verdict is not None

    @property
    def unproven(self) -> bool:
        """Something points at XLA, but no replay outside the program reproduced it."""
        return self.xla and self.verdict is None

    @property
    def whose(self) -> str:
        """The answer in one word, as the manifest's ``blame`` records it."""
        return "xla" if self.proven else "unproven" if self.unproven else "not xla"


# Complex on purpose: the rules that say whether a failure points at XLA, in the order one
# outranks the next, read as one list.
def triage(  # noqa: C901
    failure: Failure,
    verdicts: Sequence[Verdict],
    *,
    module: str | None = None,
    memory_cap: int | None = None,
    host_memory: int | None = None,
    relaxed_by: Sequence[str] = (),
    limited_by: Sequence[str] = (),
    largest_buffers: Sequence[str] = (),
    busy_at_end: str | None = None,
    output: str = "",
) -> Triage:
    """Judge ``failure`` and the replay ``verdicts``; ``module`` names the first chosen
    module's name (``jit_f``), used for ``where`` when nothing better is known;
    ``memory_cap``: the address-space limit the program set itself, if it did;
    ``host_memory``: the RAM and swap of the machine whose CPU ran XLA, if it did;
    ``relaxed_by``: the run's own fast-math flags, when a wrong value goes away without
    them; ``limited_by``: the run's own TPU flags, when a compile out of a limit compiles
    and runs without them; ``largest_buffers``: the chosen module's largest, for want of
    device memory; ``busy_at_end``: what the failing process's hook saw XLA doing as it ended
    ("executing jit(f)"), if anything; ``output``: the run's, for what the allocator said."""
    # A replay that ran past its bound computing all along proves no hang (``computing``).
    proof = next((v for v in verdicts if v.reproduced and not v.computing), None)
    hung = _replay_hung(failure, verdicts)
    where = _where(failure, proof or hung, module)
    capped = excused.reason(
        failure,
        memory_cap=memory_cap,
        host_memory=host_memory,
        relaxed_by=relaxed_by,
        limited_by=limited_by,
        largest_buffers=largest_buffers,
        replayed=verdicts,
        output=output,
    )
    if capped is not None:
        return Triage(False, _what(failure, proof), where, capped, proof)
    if failure.peer is not None:
        return Triage(False, _what(failure, None), where, _peer_failed(failure.peer))
    if proof is not None:
        return Triage(True, _what(failure, proof), where, _reproduced(proof), proof)
    if failure.callback and failure.exception is None:
        said = _callback_died if failure.kind is Kind.CRASH else _callback_running
        return Triage(False, _what(failure, None), where, said(failure, verdicts))
    if failure.native is not None:
        return Triage(False, _what(failure, None), where, _native_died(failure, verdicts))
    if (busy := _computing(verdicts)) is not None:
        return Triage(True, "hang", where, busy)
    if hung is not None:
        return Triage(True, "hang", where, _hangs_too(failure, hung), hung)
    what, stuck = _what(failure, None), _stuck_in_xla(failure)
    ran = [v for v in verdicts if v.outcome is not Outcome.NOT_REPLAYABLE]
    if stuck is not None and ran and failure.unread_inputs:
        # The call that hung had inputs nobody could read: a replay on another call's that
        # finished shows nothing either way, and the process's own record stands.
        names = ", ".join(v.module for v in ran)
        rests_on = failure.evidence or f"{stuck} when it stopped"
        return Triage(
            True,
            what,
            where,
            f"{rests_on}; the replay of {names} ran on inputs recorded from an earlier call "
            "(the hung call's own could not be read) and did not hang, which neither confirms "
            "it nor rules it out",
        )
    if stuck is not None and ran:
        # Only the compile log said XLA was busy; a replay of the module that did not hang
        # shows the program was waiting elsewhere (a sleep after its last jitted call, say).
        names = ", ".join(v.module for v in ran)
        reason = f"{stuck} when it stopped, but the replay of {names} did not hang"
        if failure.stopped_by == "signal":
            # Stopped from outside, the program was never asked what it waited for.
            reason += (
                " (it was stopped from outside collect: with collect's own --timeout, or "
                "Ctrl-C on collect, the program is asked what it waits for and the call's "
                "own inputs are replayed)"
            )
        return Triage(False, what, where, reason)
    if stuck is not None and (unreplayed := _unreplayed(verdicts)):
        # A replay that could not run (a host callback) shows nothing either way.
        stuck = f"{stuck} when it stopped{unreplayed}"
    evidence = _record_evidence(failure) or stuck
    if evidence is not None:
        return Triage(True, what, where, evidence)
    if (own := pallas.own_code(failure, verdicts)) is not None:
        return Triage(False, what, where, own)
    if (kernel := pallas.unchecked(failure, verdicts)) is not None:
        return Triage(True, what, where, kernel)
    if (precise := _default_precision(verdicts)) is not None:
        return Triage(False, what, where, precise)
    as_lowered = _as_lowered(failure, verdicts)
    if as_lowered is not None:
        return Triage(False, what, where, as_lowered)
    return Triage(False, what, where, _why_not(failure, verdicts, busy_at_end))


def _peer_failed(peer: str) -> str:
    return (
        f"another process of the job failed first: {peer}. The failure to report is that "
        "process's: collect its output (each process of a job under its own xla-bugkit "
        "collect), and look for its crash or XLA error"
    )


def _default_precision(verdicts: Sequence[Verdict]) -> str | None:
    """When a TPU module's replay differs from its float32 reference only by the TPU's
    default matmul precision (the judge's ``precision`` number): what that rests on, and the
    fix."""
    found = next((v for v in verdicts if v.numbers.get("precision") == "default"), None)
    if found is None:
        return None
    return (
        f"{function_name(module_name(found.module))} runs its float32 matmuls at the TPU's "
        "default precision, one bfloat16 pass, which is documented to differ from float32 "
        f"arithmetic (max abs error {found.numbers.get('max_abs', 0):.3g} here); with every "
        "matmul at precision HIGHEST the replay agrees with the float32 reference. For "
        "float32 accuracy: precision=jax.lax.Precision.HIGHEST on the dot, "
        "jax.default_matmul_precision('highest') around the call, or "
        "JAX_DEFAULT_MATMUL_PRECISION=highest for the whole program"
    )


def _as_lowered(f: Failure, verdicts: Sequence[Verdict]) -> str | None:
    """For a wrong value the program's check found: when a replay on the recorded inputs
    agreed with the references computed without XLA's optimizations, what that rests on.
    The values the check rejected are then what the module computes as JAX lowered it: the
    place to look is the function's jaxpr (bundled) and the check, not XLA's passes."""
    if f.kind is not Kind.WRONG_RESULT:
        return None
    agreed = next((v for v in verdicts if v.inputs == "snapshot" and _agreed(v)), None)
    if agreed is None:
        return None
    references = str(agreed.numbers["reference"])
    function = function_name(module_name(agreed.module))
    if (checked := _JAX_CHECK.search(f.headline)) is not None:
        value, op = ("a NaN" if checked["value"] == "nan" else "an Inf"), checked["op"]
        reason = (
            f"jax_debug_{checked['value']}s stopped the program at {value} that {op} made "
            f"in {function}, and XLA computes {function} on the recorded inputs as its "
            f"references do ({references}): {value} is what {op} gives on the values "
            "the function computed from the program's own inputs (outside its domain: "
            "a negative number under a square root, say), not XLA's doing"
        )
    else:
        reason = (
            f"the program's own check found a wrong value, but XLA computes {function} on "
            f"the recorded inputs as its references do ({references}): the values the "
            "check rejected are what the module computes as JAX lowered it, so look at the "
            "function's jaxpr (in the bundle) and at the check before XLA's passes (a wrong "
            "op that the references share would not show here)"
        )
    return f"{reason}; {f.check_note}" if f.check_note else reason


# jax's own NaN (Inf) check (jax_debug_nans, jax_debug_infs), as its error names the op whose
# result it rejected, after running the function again op by op: numpy's (np.seterr) says
# "invalid value encountered in sqrt", without the value.
_JAX_CHECK = re.compile(
    r"FloatingPointError: invalid value \((?P<value>nan|inf)\) encountered in (?P<op>[\w.]+)"
)


def _agreed(v: Verdict) -> bool:
    """The replay ran to the end and its result agreed with the references it computed
    (the judge's verdict with no failure, no mismatch counted, and a reference named)."""
    return (
        v.outcome is Outcome.NOT_REPRODUCED
        and v.failure is None
        and "mismatches" not in v.numbers
        and v.numbers.get("reference") not in (None, NO_REFERENCE)
    )


def _stuck_in_xla(f: Failure) -> str | None:
    """What a stopped run's compile log says XLA was doing at the stop."""
    if not KINDS[f.kind].stopped:
        return None
    if f.compiling:
        return f"XLA was still compiling jit({f.compiling})"
    if f.executing:
        return f"XLA was running jit({f.executing})"
    return None


def _computing(verdicts: Sequence[Verdict]) -> str | None:
    """What a replay that ran past its bound busy shows: a computation that did not end in
    that time, which a hang and a long or endless loop of the program's own both are."""
    busy = next((v for v in verdicts if v.failure and v.failure.kind is Kind.HANG
                 and v.computing), None)  # fmt: skip
    if busy is None:
        return None
    return (
        f"the replay of {busy.module} gave no result in its time either, but it was computing "
        f"all along ({busy.numbers['busy']} CPU cores busy in its last seconds), not waiting: "
        "a computation longer than the replay's bound, or a loop whose condition never turns "
        "false, looks just the same (check the loop's condition in the function's jaxpr, in "
        "the bundle); only a replay that waits idle, as in a deadlock, shows a hang of XLA's"
    )


def _replay_hung(failure: Failure, verdicts: Sequence[Verdict]) -> Verdict | None:
    """A replay that hung where the run showed no hang of its own: stopped by the user (no
    timeout to compare with), or ended by the program itself (its own watchdog's exit)."""
    if not KINDS[failure.kind].may_hide_a_hang:
        return None
    return next(
        (v for v in verdicts if v.failure and v.failure.kind is Kind.HANG and not v.computing),
        None,
    )


def _reproduced(proof: Verdict) -> str:
    if (kernel := pallas.proven(proof)) is not None:
        return kernel
    if proof.outcome is Outcome.REPRODUCED_HANG:
        return (
            f"the replay of {proof.module} hangs as well ({proof.evidence}): the module does "
            "not finish outside the program either"
        )
    return f"the replay of {proof.module} reproduces it ({proof.outcome.value})"


def _hangs_too(failure: Failure, hung: Verdict) -> str:
    """What a replay that hung proves, where the run itself said nothing of a hang."""
    if failure.kind is Kind.INTERRUPTED:
        # A stopped run has no timeout to compare with; a replay that hangs too is the proof.
        return f"the replay of {hung.module} hangs as well"
    return (
        f"the program ended itself with its own message ({failure.headline[:160]}), but the "
        f"replay of {hung.module} ({hung.inputs} inputs) never finishes either: the module "
        "hangs without the program, which outweighs the program's own words"
    )


def _callback_running(f: Failure, verdicts: Sequence[Verdict]) -> str:
    """A hang inside the program's own host callback, and what a replay could show of it."""
    during = f" in jit({f.executing})" if f.executing else ""
    when, at = (
        ("it was stopped", "the stop")
        if f.stopped_by is not None
        else ("the program ended itself", "its own os._exit")
    )
    return (
        f"the program's own host callback {f.callback} was running{during} when {when}: "
        f"not XLA's. XLA was only waiting for the callback's Python to return (the process's "
        f"Python stack at {at} shows the callback running), so look at what the callback "
        f"waits for; {_replayed(verdicts, 'did not hang')}"
    )


def _callback_died(f: Failure, verdicts: Sequence[Verdict]) -> str:
    """A process killed by a signal inside the program's own host callback (its own
    ``os.abort()``, say), and what a replay could show of it."""
    during = f" while jit({f.executing}) ran it" if f.executing else ""
    return (
        f"the process died on {f.signal} inside the program's own host callback {f.callback}"
        f"{during}: not XLA's. The process's Python stack at the signal shows the thread it "
        f"hit running the callback's Python, with XLA only waiting for it to return, so look "
        f"at what the callback does (an os.abort(), a C extension it calls); "
        f"{_replayed(verdicts, 'did not fail')}"
    )


def _native_died(f: Failure, verdicts: Sequence[Verdict]) -> str:
    """A process killed by a signal in the program's own native code, and what the replays
    showed of the module XLA may have been running beside it."""
    beside = f" (jit({f.executing}) was running on XLA's own threads)" if f.executing else ""
    return (
        f"the process died on {f.signal} in the program's own code, {f.native}: the thread "
        f"the signal hit was running none of jax{beside}, so look at that call (a pointer, a "
        f"buffer's size, a library's version); {_replayed(verdicts, 'did not crash')}"
    )


def _replayed(verdicts: Sequence[Verdict], ran_as: str) -> str:
    """What the replays of a failure inside a host callback could show: none can run the
    callback; ``ran_as``, what one that ran anyway showed ("did not hang")."""
    unreplayed = [v for v in verdicts if v.outcome is Outcome.NOT_REPLAYABLE]
    ran = [v for v in verdicts if v.outcome is not Outcome.NOT_REPLAYABLE]
    if ran:
        return f"the replay of {', '.join(v.module for v in ran)} {ran_as}"
    if unreplayed:
        v = unreplayed[0]
        return f"no replay ran: the replay of {v.module} could not run ({v.evidence})"
    return "no replay ran"


def _where(failure: Failure, proof: Verdict | None, module: str | None) -> str | None:
    recorded = failure.compiling or failure.executing
    if proof is not None and recorded and module_name(proof.module) != f"jit_{recorded}":
        # Execution is asynchronous: the process can be waiting on one function while
        # another crashes; the replay that reproduces the failure names the one.
        return function_name(module_name(proof.module))
    if recorded:
        return f"jit({recorded})"
    if failure.function:
        return failure.function  # the framework's own name: TensorFlow's __inference_f_13
    name = module_name(proof.module) if proof is not None else module
    return function_name(name) if name else None


def _what(failure: Failure, proof: Verdict | None) -> str:
    if proof is not None and proof.outcome is Outcome.REPRODUCED_WRONG:
        return "wrong result"
    if proof is not None and proof.outcome is Outcome.REPRODUCED_HANG:
        return "hang"
    return failure.kind.value


def _record_evidence(f: Failure) -> str | None:
    """The strongest sign of XLA in the failure record itself, as one clause."""
    if f.site:
        check = "RET_CHECK" if "RET_CHECK" in f.headline else "CHECK"
        return f"XLA's {check} at {f.site} failed"
    if f.status_code:
        return f"XLA returned the status {f.status_code}"
    if f.exception and XLA_EXCEPTION.search(f.exception):
        return f"XLA raised {f.exception}"
    if f.evidence and KINDS[f.kind].ended_inside:
        return f.evidence  # the failing process's own record
    if KINDS[f.kind].shows_xla:
        return f"the output shows XLA's {f.kind.value}"
    doing = {Phase.COMPILE: "compiling", Phase.RUN: "running compiled code"}.get(f.phase)
    if f.signal and f.signal not in _OUTSIDE_SIGNALS and doing:
        return f"the process died on {f.signal} while JAX was {doing}"
    return None


def _why_not(f: Failure, verdicts: Sequence[Verdict], busy_at_end: str | None) -> str:
    if f.callback:
        return (
            f"the program's own host callback {f.callback} raised {f.exception} inside the "
            "compiled computation, and XLA only passed its error on: the callback's own Python "
            "is at fault, not XLA (its traceback is in the output)"
        )
    if f.kind is Kind.WRONG_RESULT:
        ended = "the program's own check found a wrong value"
    elif f.kind is Kind.EXIT and f.exception and (why := jax_use.misuse(f.headline)):
        ended = f"jax raised {f.exception} about the program's own use of it: {why}"
    elif f.kind is Kind.EXIT and f.exception:
        ended = f"the program raised {f.exception}, a Python error"
    elif f.kind is Kind.HANG:
        ended = "the program was stopped after the timeout"
    elif f.kind is Kind.INTERRUPTED:
        ended = "the program was stopped by the user"
    elif not f.kind.is_failure:
        ended = "the program ran without failing"
    else:
        ended = f"the program ended with {f.describe}"
    signs = "no CHECK failure, XLA status or XLA exception"
    if KINDS[f.kind].stopped:
        # A function's later calls run in C++, unseen by the capture hook until it is
        # asked before the stop; a program that never answered hides them.
        signs += (
            ", and no compilation or execution under way that the capture hook found at the stop"
        )
    elif f.executing or f.compiling:
        doing = f"compiling jit({f.compiling})" if f.compiling else f"running jit({f.executing})"
        signs += f"; XLA was {doing} at the end"
    elif busy_at_end is not None:
        signs += f"; the capture hook saw XLA {busy_at_end} as the process ended"
    else:
        signs += ", and XLA was not busy at the end"
    ran = [v for v in verdicts if v.outcome is not Outcome.NOT_REPLAYABLE]
    if ran:
        names = ", ".join(v.module for v in ran)
        replay = f"the replay of {names} did not reproduce it"
    else:
        replay = f"no replay ran to show otherwise{_unreplayed(verdicts)}"
    return f"{ended}, and nothing in its output points at XLA ({signs}); {replay}"


def _unreplayed(verdicts: Sequence[Verdict]) -> str:
    """ ", the replay of M could not run: WHY" for the first module that could not be replayed."""
    v = next((v for v in verdicts if v.outcome is Outcome.NOT_REPLAYABLE), None)
    return f" (the replay of {v.module} could not run: {v.evidence})" if v else ""


def of_run(run: RunRecord, verdicts: Sequence[Verdict], *, module: str | None = None) -> Triage:
    """``triage`` of ``run``'s failure, with what its failing process recorded: its memory
    cap, the machine's memory where it ran on the CPU, its own fast-math flags, its own TPU
    flags that set a limit its compile exceeds, and what XLA was doing as it ended."""
    return triage(
        run.failure,
        verdicts,
        module=module,
        memory_cap=run.memory_cap,
        host_memory=run.host_memory,
        relaxed_by=run.relaxed_by,
        limited_by=run.limited_by,
        largest_buffers=run.largest_buffers,
        busy_at_end=_busy_at_end(run),
        output=run.output,
    )


def _busy_at_end(run: RunRecord) -> str | None:
    """What the failing process's own record says XLA was doing as it ended."""
    busy = run.culprit.process.unfinished if run.culprit is not None else None
    if busy is None:
        return None
    doing = "compiling" if busy.kind == "compile" else "executing"
    return f"{doing} {busy.fun or function_name(busy.module)}"
