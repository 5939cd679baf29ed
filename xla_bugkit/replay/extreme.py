"""Extreme-value inputs, for a wrong result that generated inputs do not show.

Without a snapshot a module runs on seeded normal values (``generated``, the one draw both
replay children use, so a module's two replays run on the same values), and many
miscompiles only show on the values that edge cases need: infinities and NaN (a fusion that
drops the NaN of ``max``), the largest finite values (an overflow in a reordered sum), huge
ones whose products overflow, and tiny ones whose products underflow into subnormals (flush
to zero). When the run failed with a wrong result and its module had only generated inputs,
``retry`` replays it again on each set here, in order, until one shows the difference; the
verdict then names the set. Integer and boolean parameters keep the generated small values
(they often index, and indices out of range are clamped) except in ``max``.

On the sets made to overflow (``OVERFLOWING``) an element that is infinite or NaN in both the
test and its reference is not judged: once a value has overflowed, which infinity or NaN it
ends in (``inf - inf`` or not, a sum's terms in one order or another) depends on the order of
operations, which XLA is free to choose; an ordinary training step on them gives NaN compiled
and an infinity op by op, and is not wrong. A number on either side is judged as ever.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # judge imports this module; the types only
    from xla_bugkit.failure.classify import Failure
    from xla_bugkit.verdict import Verdict

# The sets, in the order they are tried: each is a word the verdict shows.
SETS = ("inf/nan", "max", "huge", "tiny")
LABEL = "extreme values"  # how a verdict's ``inputs`` starts for one of these sets
# The sets whose values are made to overflow: where both sides overflowed, not judged.
OVERFLOWING = ("max", "huge")


def label(name: str, seed: int) -> str:
    return f"{LABEL}: {name} (seed {seed})"


_LABEL = re.compile(rf"{re.escape(LABEL)}: (?P<set>.+) \(seed (?P<seed>\d+)\)")


def parsed(inputs: str) -> tuple[str, int] | None:
    """The set and seed a verdict's ``inputs`` names (``label``), or None."""
    found = _LABEL.fullmatch(inputs)
    return None if found is None else (found["set"], int(found["seed"]))


def overflowing(inputs: str) -> str | None:
    """The set a verdict's ``inputs`` names when it is one made to overflow, else None."""
    found = parsed(inputs)
    return found[0] if found is not None and found[0] in OVERFLOWING else None


def arrays(
    types: Sequence[tuple[np.dtype[Any], Sequence[int]]], name: str, seed: int
) -> list[np.ndarray[Any, Any]]:
    """One array per parameter (``types``: its dtype and dimensions) of the set ``name``."""
    if name not in SETS:
        raise ValueError(f"unknown input set {name!r} (known: {', '.join(SETS)})")
    rng = np.random.default_rng(seed)
    return [_array(np.dtype(dtype), tuple(dims), name, rng) for dtype, dims in types]


def _array(
    dtype: np.dtype[Any], dims: tuple[int, ...], name: str, rng: np.random.Generator
) -> np.ndarray[Any, Any]:
    size = int(np.prod(dims, dtype=np.int64))
    if dtype == np.bool_:
        return rng.integers(0, 2, dims).astype(np.bool_)
    if dtype.kind in "iu":
        if name != "max":
            return rng.integers(0, 4, dims).astype(dtype)
        bounds = np.iinfo(dtype)
        return _alternate(np.array([bounds.max, bounds.min], dtype=dtype), size).reshape(dims)
    if dtype.kind not in "fc" and not _is_float(dtype):
        return np.zeros(dims, dtype)  # a type numpy cannot fill (f8 raw bits): zeros
    info = np.finfo(dtype)
    normal = rng.standard_normal(size)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if name == "inf/nan":
            # Every other value an infinity of either sign or a NaN (a six-element array
            # gets all three), the rest ordinary: reductions, max/min and selects meet each.
            values = normal.astype(np.float64)
            if size >= 6:
                special = np.array([np.inf, -np.inf, np.nan])
                values[::2] = _alternate(special, len(values[::2]))
            else:
                # Too few for every other: the first ones, NaN first (the most common case:
                # a NaN check that fast math dropped), then the infinities.
                special = np.array([np.nan, np.inf, -np.inf])[: min(size, 3)]
                values[: len(special)] = special
        elif name == "max":
            values = _alternate(np.array([float(info.max), -float(info.max)]), size)
        elif name == "huge":
            values = normal * float(np.sqrt(info.max))  # squares and products overflow
        else:
            # Around the smallest normal: sums stay normal, products go subnormal or to 0.
            values = normal * float(info.tiny)
            values[::3] = float(info.smallest_subnormal)
        out = values.astype(dtype)
    if dtype.kind == "c":
        out = (out + 1j * out[::-1]).astype(dtype)
    return out.reshape(dims)


def _is_float(dtype: np.dtype[Any]) -> bool:
    try:
        np.finfo(dtype)  # ml_dtypes' floats (bf16, f8) register their finfo
    except ValueError:
        return False
    return True


def _alternate(values: np.ndarray[Any, Any], size: int) -> np.ndarray[Any, Any]:
    return np.resize(values, size)


# The largest finite bfloat16 ((2 - 2**-7) * 2**127): a float32 beyond it becomes infinite
# when a TPU rounds a dot's operands to one bfloat16 pass, its default matmul precision.
BFLOAT16_MAX = 3.3895313892515355e38
# The largest float32: two values above its square root have a product that overflows.
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# What a verdict's numbers say under "inputs" when its inputs proved nothing (``out_of_range``).
OUT_OF_RANGE = "out of range at the default precision"


def out_of_range(name: str) -> str | None:
    """Why the set ``name`` proves nothing of a TPU module whose float32 dots run at the
    default precision (their operands rounded to one bfloat16 pass), or None: values beyond
    bfloat16's range (``max``), which that rounding makes infinite, or values whose products
    overflow float32 (``huge``), where that rounding decides which sums overflow. Read from
    the values the set makes for a float32 parameter."""
    (values,) = arrays([(np.dtype(np.float32), (64,))], name, seed=0)
    finite = np.abs(values[np.isfinite(values)]).astype(np.float64)
    top = float(finite.max()) if finite.size else 0.0
    if top > BFLOAT16_MAX:
        return (
            f"beyond bfloat16's range (|x| > {BFLOAT16_MAX:.3g}), which that rounding makes "
            "infinite"
        )
    if top * top > _FLOAT32_MAX:
        return (
            f"whose products overflow float32 (|x| > {np.sqrt(_FLOAT32_MAX):.3g}), where that "
            "rounding decides which sums overflow"
        )
    return None


def worth_trying(verdict: Verdict, expected: Failure | None) -> bool:
    """A run that failed with a wrong result, whose module ran to the end on generated
    inputs and agreed with its references (a failed replay is judged on its own)."""
    from xla_bugkit.failure.classify import Kind
    from xla_bugkit.verdict import Outcome

    return (
        expected is not None
        and expected.kind is Kind.WRONG_RESULT
        and verdict.outcome is Outcome.NOT_REPRODUCED
        and verdict.failure is None
        and verdict.inputs.startswith("generated")
    )


def retry(verdict: Verdict, expected: Failure | None, replay: Callable[[str], Verdict]) -> Verdict:
    """``verdict`` (on generated inputs), or the first replay on an extreme set that shows
    the wrong result; ``replay(name)`` replays the module on the set ``name``."""
    if not worth_trying(verdict, expected):
        return verdict
    tried = []
    for name in SETS:
        again = replay(name)
        if again.reproduced:
            note = f"; with {verdict.inputs} inputs it agreed with the reference"
            return dataclasses.replace(again, evidence=again.evidence + note)
        tried.append(_tried(name, again))
    note = f"; extreme inputs agreed too ({', '.join(tried)})"
    return dataclasses.replace(verdict, evidence=verdict.evidence + note)


def _tried(name: str, verdict: Verdict) -> str:
    """How a set that did not show the wrong result is listed in the verdict's evidence."""
    if verdict.failure is not None:
        return f"{name} (failed: {verdict.evidence})"
    if verdict.numbers.get("inputs") == OUT_OF_RANGE:
        return f"{name} ({OUT_OF_RANGE}: proves nothing)"
    overflowed = verdict.numbers.get("overflowed")
    if overflowed and overflowed == verdict.numbers.get("elements"):
        return f"{name} (every element overflowed: proves nothing)"
    if overflowed:
        return f"{name} (not judged where both overflowed)"
    return name
