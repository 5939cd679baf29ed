"""Replay one dumped HLO module in a child process and say whether the bug shows.

The child (``worker``) compiles the before-optimizations module with the recorded XLA
flags and runs it on the snapshot's arguments. A crash, error or hang in the child is compared
with the failure recorded when the bundle was made; a clean run is compared with independent
references (op by op, and the module under conservative flags), which the same child computes
after saving the test's outputs, to catch wrong results (``judge_result``). The parent never
loads XLA, so an abort, a segfault or a hang cannot take it down.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.failure.xla_status import DISPATCH
from xla_bugkit.replay import children, extreme, interpret_mode, protocol, spawn
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.judge_result import expected_kind, judge_result, wrong_result_suspected
from xla_bugkit.replay.options import PLAIN, ReplayOptions
from xla_bugkit.replay.protocol import marker
from xla_bugkit.verdict import BUSY_CORES, Outcome, Verdict


def _under(asked: ReplayInput, ran: ReplayInput, child: spawn.Child) -> str:
    """What a replay asked to run under the program's interpreter ran under."""
    xla = marker(child.done.output, protocol.UNDER) or "jaxlib"
    if ran.python is not None:
        return f"{xla} of the program's interpreter"
    return f"{xla} of xla-bugkit's (the program's interpreter {asked.python} could not run it)"


def replay(
    inp: ReplayInput, *, expected: Failure | None, options: ReplayOptions = PLAIN
) -> Verdict:
    """Replay ``inp`` in a child process and judge it.

    ``expected`` is the failure recorded when the bundle was made; None (or a success) means
    the program finished and a wrong result is suspected. ``options.use_data=False`` (or a
    missing snapshot) runs on inputs generated from ``options.seed``; ``reference=False``
    skips the wrong-result check. The child gets ``timeout`` seconds and ``memory_limit``
    bytes for the test and the references together; a reference cut short is reported
    missing, never as a failure of the module. ``keep_arrays``: a folder to copy the child's
    arrays into (the test's outputs and the references, as ``protocol.save_arrays`` wrote
    them).

    A wrong result that generated inputs do not show is tried on extreme values too
    (``extreme_set``, one of ``extreme.SETS``); the verdict names the set that showed it
    (its arrays are not kept: the bundle's repro.py runs on the generated inputs).
    ``spares``: children started ahead, one of which may run the replay.
    """
    o = options
    limits: dict[str, Any] = {
        "timeout": o.timeout,
        "limits": proc.Limits(memory_bytes=o.memory_limit) if o.memory_limit else None,
        "bound": _hang_bound(expected),
    }
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-replay-") as tmp:
        spec = spawn.child_spec(
            inp,
            Path(tmp),
            use_data=o.use_data,
            seed=o.seed,
            reference=o.reference,
            extreme_set=o.extreme_set,
        )
        # No XLA failure shows (a wrong value, the program's own): the run compiled and ran
        # the module, so no crash is expected of it, and its references may start beside it.
        spec[protocol.EARLY_REFERENCES] = wrong_result_suspected(expected)
        dropped: list[str] = []
        child, ran = spawn.spawn_settled(inp, spec, limits, o.spares, dropped)
        if o.keep_arrays is not None:
            o.keep_arrays.mkdir(parents=True, exist_ok=True)
            for saved in Path(tmp).glob("*.npz"):
                shutil.copyfile(saved, o.keep_arrays / saved.name)
            if (outputs := interpret_mode.outputs(inp, child.inputs)) is not None:
                kept = protocol.arrays_path(o.keep_arrays, protocol.INTERPRETED)
                shutil.copyfile(outputs, kept)
        unjudged = extreme.out_of_range(o.extreme_set) if o.extreme_set else None
        verdict = _verdict(
            inp, child, expected, o.timeout, reference=o.reference, out_of_range=unjudged
        )
        if inp.python is not None:
            verdict = replace(verdict, under=_under(inp, ran, child))
        if inp.release is not None:
            withheld = (*verdict.withheld, *dropped)
            verdict = replace(verdict, under=f"jaxlib {inp.release.version}", withheld=withheld)
        if inp.compiler is not None:
            under = f"{inp.compiler.dist} {inp.compiler.version}"
            verdict = replace(verdict, under=under, withheld=(*verdict.withheld, *dropped))
    if o.extreme_set is not None or not o.reference:
        return verdict
    keep_arrays = o.keep_arrays
    # A kept child serves these too: no other may open the device while it holds it.
    keeper = o.spares if o.spares is not None and children.keeps(inp.platform) else None

    def on_extremes(name: str) -> Verdict:
        # The arrays kept are those of the verdict returned: a set's replace the first
        # run's only when that set showed the failure.
        with tempfile.TemporaryDirectory(prefix="xla-bugkit-extreme-") as tmp:
            kept = Path(tmp) if keep_arrays is not None else None
            again = replay(
                inp,
                expected=expected,
                options=replace(o, keep_arrays=kept, extreme_set=name, spares=keeper),
            )
            if again.reproduced and kept is not None and keep_arrays is not None:
                for old in keep_arrays.glob("*.npz"):
                    old.unlink()
                for saved in kept.glob("*.npz"):
                    shutil.copyfile(saved, keep_arrays / saved.name)
        return again

    return extreme.retry(verdict, expected, on_extremes)


def _hang_bound(expected: Failure | None) -> proc.Bound | None:
    """A hang's replay is taken for hung a while after it starts running the module (its
    "run" phase line), as long as the run went without progress and more
    (``Failure.running_bound``), not only at its whole timeout."""
    seconds = expected.running_bound() if expected is not None else None
    if seconds is None:
        return None
    return proc.Bound(f"{protocol.PHASE}run".encode(), seconds)


def judged(
    inp: ReplayInput,
    done: proc.Completed,
    out: Path,
    expected: Failure | None,
    *,
    timeout: float,
    reference: bool = True,
) -> Verdict:
    """The verdict on a child that already replayed ``inp`` (``done``: its status and
    output, ``out``: its arrays), as ``replay`` judges its own: for callers that run several
    modules in one child."""
    return _verdict(inp, spawn.child_of(done, out), expected, timeout, reference=reference)


def _verdict(
    inp: ReplayInput,
    child: spawn.Child,
    expected: Failure | None,
    timeout: float,
    *,
    reference: bool,
    out_of_range: str | None = None,
) -> Verdict:
    """``out_of_range``: why the inputs prove nothing at a TPU's default matmul precision
    (``extreme.out_of_range``), if they do not."""
    verdict = None if child.tested else _judge_failure(inp, child, expected, timeout)
    verdict = verdict or judge_result(
        inp, child, expected, timeout if reference else None, out_of_range
    )
    verdict = interpret_mode.with_check(inp, verdict)
    recorded = protocol.markers(child.done.output, protocol.WITHHELD)
    tpu = spawn.admitted_tpu_args(inp).withheld
    withheld = (*spawn.admitted_flags(inp).withheld, *tpu, *recorded)
    return replace(verdict, withheld=withheld) if withheld else verdict


def _judge_failure(
    inp: ReplayInput, child: spawn.Child, expected: Failure | None, timeout: float
) -> Verdict | None:
    """The verdict when the test child did not run to the end; None when it did."""
    base = Verdict(inp.name, Outcome.NOT_REPRODUCED, "", child.inputs)
    done = child.done
    if child.refusal is not None:
        return Verdict(inp.name, Outcome.NOT_REPLAYABLE, child.refusal, child.inputs)
    failure = classify(
        done.output, exit_status=done.returncode, timed_out=done.timed_out, phase=child.phase
    )
    where = "compiling" if child.phase is Phase.COMPILE else "running"
    if done.timed_out and child.phase is None:
        # It never got as far as compiling (importing jax on a loaded machine, say): that
        # proves nothing about the module either way.
        evidence = (
            f"the replay did not start compiling within {timeout:g} s "
            "(a busy machine? give it longer with --replay-timeout)"
        )
        return Verdict(inp.name, Outcome.NOT_REPLAYABLE, evidence, child.inputs)
    if done.timed_out:
        return _timed_out(inp, child, expected, timeout, failure)
    if not failure.kind.is_failure:
        return None
    if expected is not None and expected.kind.is_failure and expected.same_bug(failure):
        crashed = KINDS[failure.kind].dies
        outcome = Outcome.REPRODUCED_CRASH if crashed else Outcome.REPRODUCED_ERROR
        evidence = failure.describe
        if _lost_here(expected) and failure.headline.startswith("killed by "):
            # A segfault prints no message: neither the run nor the replay has one to show.
            evidence = f"no message in the run or the replay, only how it died: {evidence}"
        elif _lost_here(expected):
            evidence = f"the run's message was not captured; the replay's: {evidence}"
        elif not expected.message_lost and expected.signature != failure.signature:
            # The same failure, spelled otherwise: by another build (names, literals), or as
            # the program met it (an abort reading a result XLA failed to compute).
            evidence += f" (the run showed it as: {_quoted(expected.headline)})"
        return Verdict(inp.name, outcome, evidence, child.inputs, failure)
    if failure.kind is Kind.EXIT:
        # No XLA error, crash or hang: a Python error of the replay's own code (an input or a
        # reference too large for the memory cap, say), which judges nothing of the module.
        evidence = f"the replay's own code failed while {where}: {failure.describe}"
        return Verdict(inp.name, Outcome.NOT_REPLAYABLE, evidence, child.inputs, failure)
    differently = "differently" if expected is not None and expected.kind.is_failure else ""
    evidence = f"the replay failed {differently} while {where}: {failure.describe}"
    return Verdict(inp.name, base.outcome, " ".join(evidence.split()), child.inputs, failure)


def _busy(inp: ReplayInput, done: proc.Completed) -> dict[str, float]:
    """A replay its timeout stopped: ``{"busy": cores}``, the CPU cores its process kept busy
    in its last seconds, where the module ran on this host's CPU (on an accelerator the host
    waits idle either way, and says nothing); {} where not measured."""
    if done.busy is None or inp.platform != "cpu":
        return {}
    return {"busy": round(done.busy, 2)}


def _timed_out(
    inp: ReplayInput,
    child: spawn.Child,
    expected: Failure | None,
    timeout: float,
    failure: Failure,
) -> Verdict:
    """A replay its time ran out on, past compiling: a hang where one was expected, with
    how busy it kept the CPU as it went (``_busy``)."""
    done = child.done
    where = "compiling" if child.phase is Phase.COMPILE else "running"
    hang = expected_kind(expected) is Kind.HANG
    outcome = Outcome.REPRODUCED_HANG if hang else Outcome.NOT_REPRODUCED
    bound = expected.running_bound() if expected is not None else None
    evidence = f"no result after {timeout:g} s while {where}"
    if bound is not None and child.phase is Phase.RUN:
        evidence = f"no result within {bound:g} s of running it"
    numbers = _busy(inp, done)
    if (cores := numbers.get("busy")) is not None:
        evidence += ", computing all along" if cores >= BUSY_CORES else ", waiting idle"
        evidence += f" ({cores:.2f} CPU cores busy in its last seconds)"
    if not hang:
        evidence += f" (a hang, though {expected_kind(expected).value} was expected)"
    return Verdict(inp.name, outcome, evidence, child.inputs, failure, numbers=numbers)


def _lost_here(expected: Failure) -> bool:
    """The run's message was lost and nothing has stood in for it yet."""
    return expected.message_lost and not (expected.evidence or "").startswith("the run's message")


def _quoted(headline: str, limit: int = 160) -> str:
    """A run's headline as a verdict quotes it: its wrappers of an asynchronous failure
    said once, and a long one cut between words (never inside a number)."""
    once = re.sub(f"(?:{re.escape(DISPATCH)}){{2,}}", DISPATCH, headline)
    return once if len(once) <= limit else once[:limit].rsplit(" ", 1)[0] + "…"
