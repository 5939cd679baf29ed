"""The verdict on a replay whose test ran to the end (``judge``): its outputs compared with
its references (op by op, the module under conservative flags, a Pallas kernel's interpret
mode) and with the run's recorded result, in the order one outcome outranks the next: too
large to compare here, the TPU's default precision, a wrong value, a kernel no reference
checks, a kernel whose own code gives the values.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.replay import default_precision, extreme, interpret_mode, protocol, spawn
from xla_bugkit.replay.compare import Comparison, compare_outputs
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.verdict import (
    COMPILED_DIFFERS,
    INTERPRET_MODE,
    NO_REFERENCE,
    OWN_CODE_GIVES,
    Outcome,
    Verdict,
)
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE


def expected_kind(expected: Failure | None) -> Kind:
    return Kind.SUCCESS if expected is None else expected.kind


def wrong_result_suspected(expected: Failure | None) -> bool:
    """The run showed no XLA failure: it succeeded, or the program's own check failed
    (a wrong value it found, or any other non-XLA exit)."""
    return KINDS[expected_kind(expected)].needs_reference


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
def judge_result(  # noqa: C901, PLR0915
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
        outcome = Outcome.NOT_REPLAYABLE if wrong_result_suspected(expected) else None
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
    # Inputs holding a NaN: a NaN in a reference may be what IEEE arithmetic propagates.
    nan_inputs = protocol.marker(test.done.output, protocol.NAN_INPUTS) is not None
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
            nan_inputs=nan_inputs,
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
    suspected = wrong_result_suspected(expected)
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
            evidence = f"ran without the expected {expected_kind(expected).value}; {evidence}"
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
