"""Compare a replay's outputs with a reference, by run_hlo_module's rule, scaled.

An element mismatches when its absolute error exceeds the absolute bound *and* its relative
error exceeds ``rel_bound`` (1e-3), so tiny values and large values are both judged fairly.
The absolute bound follows the scale of the reference: ``abs_bound`` (1e-3) for an output of
values around 1 or more, that much less for an output of small values (an output of values
near 1e-5 that is 24% off is wrong, though each error is under 1e-5), and never under a few
units in the last place of the output's type. A NaN where the reference has none (or the
reverse) always mismatches, as does an infinity that the reference does not have, with one
exception: where the reference itself is NaN and the output a number, the reference's own
arithmetic broke down (an overflow met another: inf - inf, 0 * inf) and proves nothing of
the output; such elements are counted apart (``unreferenced``), never as mismatches; so is
any output, an infinity or NaN too, where the reference is NaN because it has no value there
(``open_nan``: the op-by-op reference of a sum whose order decides whether it overflows). An
infinite reference is what IEEE arithmetic gives, and a number there still mismatches (XLA
folding sqrt(abs(x))**2 into abs(x) is such a bug). Integers, booleans and shapes must match
exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from xla_bugkit.verdict.tolerance import ABS_BOUND, DEFAULT_TOLERANCE, REL_BOUND, Tolerance

ULPS = 8  # rounding a fused or reordered computation may add, in units of the last place
# How many differing positions a report lists.
MAX_INDICES = 5


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing outputs; indices are (output number, *array index)."""

    mismatches: int = 0
    total: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    nans: int = 0  # NaNs in the actual outputs
    new_nans: int = 0  # of them, where the reference has a number
    unreferenced: int = 0  # numbers where the reference is NaN: not judged
    overflowed: int = 0  # on inputs made to overflow: different infinities or NaN, not judged
    first_indices: tuple[tuple[int, ...], ...] = ()
    notes: tuple[str, ...] = field(default=())  # structural differences (count, shape, dtype)

    @property
    def close(self) -> bool:
        return self.mismatches == 0 and not self.notes

    def numbers(self) -> dict[str, object]:
        """The numbers a verdict records (JSON-ready)."""
        return {
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "mismatches": self.mismatches,
            "elements": self.total,
            "nans": self.nans,
            "unreferenced": self.unreferenced,
            "first_indices": [list(i) for i in self.first_indices],
            "notes": list(self.notes),
            # Only where inputs were made to overflow: records of other replays keep their keys.
            **({"overflowed": self.overflowed} if self.overflowed else {}),
        }

    def summary(self) -> str:
        """One line: what differs and by how much."""
        if self.notes:
            return "; ".join(self.notes)
        new = f"{self.new_nans} NaN where the reference has a number"
        if self.new_nans and self.new_nans == self.mismatches:
            how = new  # the errors are the NaNs: "max abs error inf" would say less
        else:
            how = f"max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}"
            how += f", {new}" if self.new_nans else ""
        if self.unreferenced:
            how += f"; {self.unreferenced} more where the reference is NaN, not judged"
        return (
            f"{self.mismatches}/{self.total} elements differ ({how}), first at "
            f"{_where(self.first_indices[0]) if self.first_indices else '-'}"
        )


def _where(index: tuple[int, ...]) -> str:
    """``(0, 16384)`` -> ``"[16384] of output 0"``: an index is the output's number, then the
    element's place in it (as the report's table shows it)."""
    return f"{list(index[1:])} of output {index[0]}"


def _as_float(a: np.ndarray) -> np.ndarray:
    # float64 holds every narrower float exactly (bf16, f8 via ml_dtypes); complex stays complex.
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def _errors(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, e = _as_float(actual), _as_float(expected)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_err = np.abs(a - e).astype(np.float64)
        rel_err = abs_err / np.abs(e)
    both_nan = np.isnan(a) & np.isnan(e)
    same_inf = np.isinf(a) & (a == e)
    exact = (a == e) | both_nan | same_inf
    abs_err = np.where(exact, 0.0, abs_err)
    rel_err = np.where(exact, 0.0, rel_err)
    # A lone NaN or infinity is an infinite error, so it always counts.
    abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)
    rel_err = np.where(np.isnan(rel_err), np.inf, rel_err)
    return abs_err, rel_err


def _is_floating(a: np.ndarray) -> bool:
    if a.dtype.kind in "biufc":
        return a.dtype.kind in "fc"
    # Imported only here: ml_dtypes takes most of a second to import, and a parent that
    # compares plain arrays should not pay for it (an ml_dtypes array means it is loaded).
    import ml_dtypes

    try:
        # ml_dtypes' narrow integers (int4, uint2, ...) have kind "V" like its floats.
        ml_dtypes.iinfo(a.dtype)  # type: ignore[no-untyped-call]
    except ValueError:
        return True
    return False


def compare_arrays(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    abs_bound: float = ABS_BOUND,
    rel_bound: float = REL_BOUND,
    output: int = 0,
    scaled: bool = True,
    every_element: bool = False,
    open_nan: bool = False,
    finite_only: bool = False,
    nan_inputs: bool = False,
) -> Comparison:
    """Compare one output array with its reference; ``output`` prefixes reported indices;
    ``scaled``: ``abs_bound`` follows the reference's scale (else it is taken as it is);
    ``every_element``: a NaN reference is judged too (shrink keeps a failure's
    class, whatever the reference is); ``open_nan``: a NaN reference judges no output, not
    even an infinity (the reference has no value there); ``finite_only``: an element
    infinite or NaN on both sides is not judged (inputs made to overflow: which infinity or
    NaN an overflow ends in, ``inf - inf`` or not, depends on the order of operations, which
    XLA chooses), and is counted as ``overflowed``; a number on either side is judged;
    ``nan_inputs``: the inputs hold a NaN, which a reference's NaN may be propagating (a
    max over them), so a number where the reference is NaN mismatches."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return Comparison(notes=(f"output {output}: shape {actual.shape} vs {expected.shape}",))
    if _is_floating(actual) != _is_floating(expected):
        return Comparison(notes=(f"output {output}: dtype {actual.dtype} vs {expected.dtype}",))
    if _is_floating(actual):
        abs_err, rel_err = _errors(actual, expected)
        # A NaN reference where the output is a number proves nothing there: not a
        # mismatch, and not the largest error either.
        no_reference = np.isnan(_as_float(expected))
        no_reference &= open_nan | np.isfinite(_as_float(actual))
        no_reference &= not every_element and (open_nan or not nan_inputs)
        abs_err = np.where(no_reference, 0.0, abs_err)
        rel_err = np.where(no_reference, 0.0, rel_err)
        unreferenced = int(np.count_nonzero(no_reference))
        overflow = np.zeros(actual.shape, dtype=bool)
        if finite_only and not every_element:
            overflow = ~np.isfinite(_as_float(actual)) & ~np.isfinite(_as_float(expected))
            overflow &= ~no_reference & (abs_err > 0)
            abs_err = np.where(overflow, 0.0, abs_err)
            rel_err = np.where(overflow, 0.0, rel_err)
        overflowed = int(np.count_nonzero(overflow))
        bound = _scaled(abs_bound, actual, expected) if scaled else abs_bound
        bad = (abs_err > bound) & (rel_err > rel_bound)
        lone = np.isnan(_as_float(actual))
        nans = int(np.count_nonzero(lone))
        new_nans = int(np.count_nonzero(lone & ~np.isnan(_as_float(expected)) & ~overflow))
    else:
        # Exact types: any difference counts; errors are reported as plain magnitudes.
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        abs_err = diff
        with np.errstate(invalid="ignore", divide="ignore"):
            rel_err = np.where(diff == 0, 0.0, diff / np.abs(expected.astype(np.float64)))
        bad = actual != expected
        nans = new_nans = unreferenced = overflowed = 0
    indices = tuple((output, *map(int, i)) for i in np.argwhere(bad)[:MAX_INDICES])
    return Comparison(
        mismatches=int(np.count_nonzero(bad)),
        total=int(actual.size),
        max_abs=_max(abs_err),
        max_rel=_max(rel_err),
        nans=nans,
        new_nans=new_nans,
        unreferenced=unreferenced,
        overflowed=overflowed,
        first_indices=indices,
    )


def _scaled(abs_bound: float, actual: np.ndarray, expected: np.ndarray) -> float:
    """The absolute bound for an output whose reference is ``expected``: ``abs_bound``
    times the reference's largest finite magnitude where that is under 1, and at least
    ``ULPS`` units in the last place of the output's type at that magnitude."""
    magnitudes = np.abs(_as_float(expected))
    finite = magnitudes[np.isfinite(magnitudes)]
    scale = float(np.max(finite)) if finite.size else 0.0
    eps = _eps(actual.dtype)
    # An all-zero reference has no scale: a thousandth of a unit in the last place at 1.
    return max(abs_bound * min(scale, 1.0), ULPS * eps * scale, abs_bound * eps)


def _eps(dtype: np.dtype) -> float:
    """The spacing of ``dtype`` at 1 (bf16's and float8's through ml_dtypes)."""
    try:
        return float(np.finfo(dtype).eps)
    except ValueError:
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)  # type: ignore[no-untyped-call]


def _max(errors: np.ndarray) -> float:
    return float(np.max(errors)) if errors.size else 0.0


def compare_outputs(
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    *,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    every_element: bool = False,
    open_nan: bool = False,
    finite_only: bool = False,
    nan_inputs: bool = False,
) -> Comparison:
    """Compare every output with its reference and combine the results (``every_element``,
    ``open_nan``, ``finite_only``, ``nan_inputs``: as ``compare_arrays``)."""
    if len(actual) != len(expected):
        return Comparison(notes=(f"{len(actual)} outputs vs {len(expected)}",))
    atol = ABS_BOUND if tolerance.atol is None else tolerance.atol
    parts = [
        compare_arrays(
            a,
            e,
            abs_bound=atol,
            rel_bound=tolerance.rtol,
            output=i,
            scaled=tolerance.atol is None,
            every_element=every_element,
            open_nan=open_nan,
            finite_only=finite_only,
            nan_inputs=nan_inputs,
        )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True))
    ]
    return _combine(parts)


def _combine(parts: Sequence[Comparison]) -> Comparison:
    first: list[tuple[int, ...]] = []
    for part in parts:
        first.extend(part.first_indices)
    notes: list[str] = []
    for part in parts:
        notes.extend(part.notes)
    return Comparison(
        mismatches=sum(p.mismatches for p in parts),
        total=sum(p.total for p in parts),
        max_abs=max((p.max_abs for p in parts), default=0.0),
        max_rel=max((p.max_rel for p in parts), default=0.0),
        nans=sum(p.nans for p in parts),
        new_nans=sum(p.new_nans for p in parts),
        unreferenced=sum(p.unreferenced for p in parts),
        overflowed=sum(p.overflowed for p in parts),
        first_indices=tuple(first[:MAX_INDICES]),
        notes=tuple(notes),
    )
