"""Replay one dumped HLO module in a child process and say whether the bug shows.

The child (``worker``) compiles the before-optimizations module with the recorded XLA
flags and runs it on the snapshot's arguments. A crash, error or hang in the child is compared
with the failure recorded when the bundle was made; a clean run is compared with independent
references (op by op, and the module under conservative flags), which the same child computes
after saving the test's outputs, to catch wrong results. The parent never loads XLA, so an
abort, a segfault or a hang cannot take it down.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import proc
from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.failure.xla_status import DISPATCH
from xla_bugkit.replay import children, default_precision, extreme, interpret_mode, protocol, spawn
from xla_bugkit.replay.compare import Comparison, compare_outputs
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.replay.options import PLAIN, ReplayOptions
from xla_bugkit.replay.protocol import marker
from xla_bugkit.verdict import (
    COMPILED_DIFFERS,
    INTERPRET_MODE,
    NO_REFERENCE,
    OWN_CODE_GIVES,
    Outcome,
    Verdict,
)
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE


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
        spec[protocol.EARLY_REFERENCES] = KINDS[_expected_kind(expected)].needs_reference
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
    verdict = verdict or _judge_result(
        inp, child, expected, timeout if reference else None, out_of_range
    )
    verdict = interpret_mode.with_check(inp, verdict)
    recorded = protocol.markers(child.done.output, protocol.WITHHELD)
    tpu = spawn.admitted_tpu_args(inp).withheld
    withheld = (*spawn.admitted_flags(inp).withheld, *tpu, *recorded)
    return replace(verdict, withheld=withheld) if withheld else verdict


def _expected_kind(expected: Failure | None) -> Kind:
    return Kind.SUCCESS if expected is None else expected.kind


def _wrong_result_suspected(expected: Failure | None) -> bool:
    """The run showed no XLA failure: it succeeded, or the program's own check failed
    (a wrong value it found, or any other non-XLA exit)."""
    return KINDS[_expected_kind(expected)].needs_reference


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
        hang = _expected_kind(expected) is Kind.HANG
        outcome = Outcome.REPRODUCED_HANG if hang else Outcome.NOT_REPRODUCED
        evidence = f"no result after {timeout:g} s while {where}"
        if not hang:
            evidence += f" (a hang, though {_expected_kind(expected).value} was expected)"
        return Verdict(inp.name, outcome, evidence, child.inputs, failure)
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


def _lost_here(expected: Failure) -> bool:
    """The run's message was lost and nothing has stood in for it yet."""
    return expected.message_lost and not (expected.evidence or "").startswith("the run's message")


def _load(path: Path) -> list[np.ndarray] | None:
    return protocol.load_arrays(path) if path.exists() else None


def _too_large_to_compare(path: Path) -> str:
    """Why the outputs at ``path`` are not compared with their references in this process
    ("": they are): a comparison holds them, a reference and their differences at once,
    and this process runs under no memory limit of its own."""
    try:
        size = path.stat().st_size
        budget = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _COMPARE_SHARE
    except (OSError, ValueError):
        return ""
    if size <= budget:
        return ""
    return (
        f"its outputs ({size / 1e9:.1f} GB) are not compared with references here: more "
        f"than 1/{_COMPARE_SHARE} of this machine's memory ({budget / 1e9:.1f} GB)"
    )


# A comparison needs several times its outputs' size (the outputs, a reference in float64,
# their differences): outputs over this share of the machine's memory are not compared.
_COMPARE_SHARE = 16


def _references(
    child: spawn.Child, timeout: float | None
) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """The reference results that exist, and why the others are missing (None: none asked)."""
    found: dict[str, list[np.ndarray]] = {}
    missing: list[str] = []
    if timeout is None:
        return found, missing
    done = child.done
    if done.timed_out:
        ended = f"no result after {timeout:g} s"
    else:
        ended = classify(done.output, exit_status=done.returncode, phase=Phase.RUN).describe
    references = (("op-by-op", protocol.OPBYOP), ("conservative flags", protocol.CONSERVATIVE))
    for label, stem in references:
        arrays = _load(protocol.arrays_path(child.out, stem))
        error = protocol.error_path(child.out, stem)
        if arrays is not None:
            found[label] = arrays
        elif error.exists():
            missing.append(f"{label}: {error.read_text()[:200]}")
        else:
            missing.append(f"{label}: the replay child ended first ({ended[:200]})")
    return found, missing


# Complex on purpose: a finished test's outcomes, in the order one outranks the next (too
# large to compare, a default precision, a wrong value, a kernel no reference checks, a
# kernel whose own code its interpret mode blames), read as one list.
def _judge_result(  # noqa: C901, PLR0915
    inp: ReplayInput,
    test: spawn.Child,
    expected: Failure | None,
    timeout: float | None,
    out_of_range: str | None = None,
) -> Verdict:
    """The verdict on a test that ran to the end; ``timeout`` None: no references asked."""
    too_large = _too_large_to_compare(protocol.arrays_path(test.out, protocol.TEST))
    if too_large:
        # Ran to completion, which is the answer where a crash or an error was expected;
        # a wrong result could not be looked for here.
        outcome = Outcome.NOT_REPLAYABLE if _wrong_result_suspected(expected) else None
        evidence = f"ran to completion; {too_large}"
        return Verdict(inp.name, outcome or Outcome.NOT_REPRODUCED, evidence, test.inputs)
    outputs = _load(protocol.arrays_path(test.out, protocol.TEST)) or []
    recorded = _load(protocol.arrays_path(test.out, protocol.RECORDED))
    tolerance = inp.tolerance
    matches = (
        None if recorded is None else compare_outputs(outputs, recorded, tolerance=tolerance).close
    )
    kept = interpret_mode.outputs(inp, test.inputs)
    found, missing = interpret_mode.with_outputs(kept, *_references(test, timeout))
    # Sums whose order decides whether they overflow: the op-by-op reference has no value
    # there (NaN), and judges no output there.
    unordered = protocol.markers(test.done.output, protocol.UNORDERED)
    # Inputs made to overflow: only what stays finite on both sides is judged.
    overflowing = extreme.overflowing(test.inputs)
    wrong: tuple[str, Comparison] | None = None
    agreeing: list[str] = []
    unjudged = ""
    overflowed = 0  # elements not judged for an overflow, in the first comparison that had any
    overflow_note = ""
    for label, arrays in found.items():
        open_nan = label == "op-by-op" and bool(unordered)
        comparison = compare_outputs(
            outputs,
            arrays,
            tolerance=tolerance,
            open_nan=open_nan,
            finite_only=overflowing is not None,
        )
        if comparison.close:
            agreeing.append(label)
        elif wrong is None:
            wrong = (label, comparison)
        if open_nan and comparison.unreferenced:
            unjudged = _unjudged(comparison.unreferenced, unordered)
        if overflowing is not None and comparison.overflowed and not overflowed:
            overflowed = comparison.overflowed
            overflow_note = _overflowed(overflowed, comparison.total, overflowing)
    disputed = ""
    if wrong is not None and "op-by-op" in agreeing:
        # Whole-module optimizations never touch the op-by-op reference. When it agrees with
        # the test, a whole-module reference that differs has a miscompile of its own (as the
        # YNN fusion of jax#39103 once did under the conservative flags), not the test.
        disputed = f" (the {wrong[0]} reference differs: {wrong[1].summary()})"
        wrong = None
    suspected = _wrong_result_suspected(expected)
    default = None
    if wrong is not None:
        default = default_precision.evidence(test.out, found[wrong[0]], wrong[1], out_of_range)
    if wrong is not None and default is not None:
        # Not a wrong result: the TPU rounds float32 dots to one bfloat16 pass by default.
        numbers = {**wrong[1].numbers(), "reference": wrong[0], "precision": "default"}
        if out_of_range is not None and out_of_range in default:
            numbers["inputs"] = extreme.OUT_OF_RANGE
        return Verdict(inp.name, Outcome.NOT_REPRODUCED, default, test.inputs, None, numbers)
    if wrong is not None:
        label, comparison = wrong
        numbers = {**comparison.numbers(), "reference": label}
        evidence = _differs(label, comparison)
        evidence += (unjudged if label == "op-by-op" else "") + overflow_note
        if tolerance != DEFAULT_TOLERANCE:
            evidence += f" (at {tolerance.describe()})"
        outcome = Outcome.REPRODUCED_WRONG if suspected else Outcome.NOT_REPRODUCED
        if not suspected:
            evidence = f"ran without the expected {_expected_kind(expected).value}; {evidence}"
        return Verdict(inp.name, outcome, evidence, test.inputs, None, numbers, matches)
    if not found and suspected and any(protocol.KERNEL_ONLY in m for m in missing):
        # Nothing outside the kernel can check it: unverified, neither way.
        evidence = interpret_mode.unchecked(inp)
        return Verdict(inp.name, Outcome.NOT_REPLAYABLE, evidence, test.inputs, None, {}, matches)
    agreed = ", ".join(agreeing) or NO_REFERENCE
    evidence = f"ran to completion; result agrees with {agreed}{disputed}{unjudged}{overflow_note}"
    if overflow_note.startswith("; nothing is judged"):
        evidence = f"ran to completion{overflow_note}"
    if own := interpret_mode.own_code(inp, agreeing, suspected):
        evidence = f"ran to completion; {OWN_CODE_GIVES}{disputed}"
    if missing:
        evidence += f" (missing: {'; '.join(missing)})"
    return Verdict(
        inp.name,
        Outcome.NOT_REPRODUCED,
        evidence,
        test.inputs,
        None,
        {"reference": agreed, **own, **_overflow_numbers(overflowed, outputs)},
        matches,
    )


def _differs(label: str, comparison: Comparison) -> str:
    if label == INTERPRET_MODE:
        return f"{COMPILED_DIFFERS}: {comparison.summary()}"
    return f"result differs from the {label} reference: {comparison.summary()}"


def _unjudged(elements: int, unordered: list[str]) -> str:
    """What the op-by-op reference left unjudged, and why (its ``protocol.UNORDERED`` lines)."""
    return (
        f"; {elements} {'element is' if elements == 1 else 'elements are'} not judged, "
        f"where a sum has no one right value: {'; '.join(unordered)}"
    )


def _overflow_numbers(overflowed: int, outputs: list[np.ndarray]) -> dict[str, int]:
    """The numbers of a verdict that agreed where some elements were not judged for an
    overflow: how many, of how many."""
    if not overflowed:
        return {}
    return {"overflowed": overflowed, "elements": sum(int(np.size(a)) for a in outputs)}


def _overflowed(elements: int, total: int, name: str) -> str:
    """Why elements were not judged on a set of inputs made to overflow."""
    if elements == total:
        which = f"nothing is judged: each of its {total} elements is"
    else:
        which = "1 element is" if elements == 1 else f"{elements} elements are"
        which += " not judged,"
    return (
        f"; {which} an infinity or NaN in both the result and the reference on the "
        f"'{name}' inputs (what an overflow ends in depends on the order XLA computes in)"
    )


def _quoted(headline: str, limit: int = 160) -> str:
    """A run's headline as a verdict quotes it: its wrappers of an asynchronous failure
    said once, and a long one cut between words (never inside a number)."""
    once = re.sub(f"(?:{re.escape(DISPATCH)}){{2,}}", DISPATCH, headline)
    return once if len(once) <= limit else once[:limit].rsplit(" ", 1)[0] + "…"
