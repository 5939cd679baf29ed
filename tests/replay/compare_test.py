"""run_hlo_module's comparison rule, scaled: both bounds exceeded, NaN/Inf always, exact
types exact."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from xla_bugkit.replay.compare import compare_arrays, compare_outputs

NAN, INF = np.nan, np.inf


def test_equal_arrays_are_close() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = compare_arrays(a, a.copy())
    assert result.close
    assert (result.mismatches, result.total, result.max_abs, result.max_rel) == (0, 6, 0.0, 0.0)


def test_a_mismatch_needs_both_bounds_exceeded() -> None:
    expected = np.array([1000.0, 1e-5, 1.0], np.float64)
    # 0.5 abs on 1000 is 5e-4 rel; 1e-5 abs on 1e-5 is 100% rel but tiny abs; 0.01 is both.
    actual = np.array([1000.5, 2e-5, 1.01], np.float64)
    result = compare_arrays(actual, expected)
    assert result.mismatches == 1
    assert result.first_indices == ((0, 2),)
    assert abs(result.max_abs - 0.5) < 1e-12
    assert abs(result.max_rel - 1.0) < 1e-12


def test_the_absolute_bound_follows_the_scale_of_the_reference() -> None:
    # An output of values near 1.5e-5 (a kernel density, say), one of them 24% off: every
    # error is under 1e-5, yet it is as wrong as 1.24 for 1.0.
    expected = np.full(8, 1.5e-5, np.float32)
    actual = expected.copy()
    actual[3] = 1.9e-5
    result = compare_arrays(actual, expected)
    assert result.mismatches == 1 and result.first_indices == ((0, 3),)
    # Rounding of the same computation in another order stays close, at any scale.
    for scale in (1e-6, 1.0, 1e6):
        values = np.linspace(0.5, 1.0, 64, dtype=np.float32) * np.float32(scale)
        nudged = np.nextafter(values, np.float32(np.inf))
        assert compare_arrays(nudged, values).close
    # bfloat16 rounds at 2**-8: a few units in its last place are not a wrong result.
    ones = np.ones(4, ml_dtypes.bfloat16)
    assert compare_arrays(ones, ones.astype(np.float32) + 0.004).close


def test_bounds_can_be_loosened() -> None:
    result = compare_arrays(np.array([1.01]), np.array([1.0]), abs_bound=0.1, rel_bound=0.1)
    assert result.close


def test_nan_rules() -> None:
    both = compare_arrays(np.array([NAN, 1.0]), np.array([NAN, 1.0]))
    assert both.close and both.nans == 1
    lone = compare_arrays(np.array([NAN, 1.0]), np.array([0.0, 1.0]))
    assert lone.mismatches == 1 and lone.nans == 1 and lone.max_abs == INF
    # A reference that is NaN where the output is a number proves nothing there.
    missing = compare_arrays(np.array([0.0]), np.array([NAN]))
    assert missing.mismatches == 0 and missing.unreferenced == 1 and missing.close


def test_a_nan_reference_is_judged_where_the_inputs_hold_a_nan() -> None:
    """The YNN reduce fusion's max drops the input's NaN (jaxlib 0.10.2): the reference's
    NaN is IEEE's propagation, and the number there is the wrong value."""
    dropped = compare_arrays(np.array(1.0, np.float32), np.array(NAN, np.float32),
                             nan_inputs=True)  # fmt: skip
    assert dropped.mismatches == 1 and dropped.unreferenced == 0
    kept = compare_outputs([np.array([NAN, 2.0])], [np.array([NAN, 2.0])], nan_inputs=True)
    assert kept.close
    # The op-by-op reference of an unordered sum has no value there, inputs or not.
    opened = compare_arrays(np.array([5.0]), np.array([NAN]), nan_inputs=True, open_nan=True)
    assert opened.close and opened.unreferenced == 1


def test_a_nan_reference_proves_nothing_where_the_output_is_a_number() -> None:
    # An op-by-op reference on huge generated inputs: exp overflows to inf and inf - inf is
    # NaN, where the compiled module, which rewrote the expression, gave numbers.
    expected = np.array([NAN, NAN, 0.5, 2.0], np.float32)
    actual = np.array([3.0, -3.0, 0.5, 2.0], np.float32)
    result = compare_arrays(actual, expected)
    assert result.close and result.unreferenced == 2 and result.max_abs == 0.0
    wrong = compare_arrays(np.array([3.0, -3.0, 0.9, 2.0], np.float32), expected)
    assert wrong.mismatches == 1 and wrong.first_indices == ((0, 2),)
    assert wrong.summary() == (
        "1/4 elements differ (max abs error 0.4, max rel error 0.8; 2 more where the "
        "reference is NaN, not judged), first at [2] of output 0"
    )
    # An infinite reference is IEEE's answer: a number there is still a mismatch.
    assert compare_arrays(np.array([1.0e30], np.float32), np.array([INF], np.float32)).mismatches


def test_infinities_match_only_themselves() -> None:
    assert compare_arrays(np.array([INF, -INF]), np.array([INF, -INF])).close
    assert compare_arrays(np.array([INF]), np.array([-INF])).mismatches == 1
    assert compare_arrays(np.array([INF]), np.array([1e30])).mismatches == 1


def test_integers_and_bools_must_be_exact() -> None:
    result = compare_arrays(np.array([1000, 5], np.int32), np.array([1000, 6], np.int32))
    assert result.mismatches == 1 and result.first_indices == ((0, 1),)
    assert compare_arrays(np.array([True, False]), np.array([True, True])).mismatches == 1
    assert compare_arrays(np.array([7], np.uint64), np.array([7], np.uint64)).close


def test_complex_error_is_the_modulus() -> None:
    result = compare_arrays(np.array([1 + 1j], np.complex64), np.array([1 + 0.9j], np.complex64))
    assert result.mismatches == 1
    assert abs(result.max_abs - 0.1) < 1e-6
    assert compare_arrays(np.array([3 + 4j]), np.array([3 + 4j])).close


def test_bfloat16_and_int4() -> None:
    bf16 = ml_dtypes.bfloat16
    assert compare_arrays(np.array([1.0, 2.0], bf16), np.array([1.0, 2.0], bf16)).close
    assert compare_arrays(np.array([1.0, NAN], bf16), np.array([1.0, 2.0], bf16)).mismatches == 1
    int4 = ml_dtypes.int4
    assert compare_arrays(np.array([1, -2], int4), np.array([1, -1], int4)).mismatches == 1


def test_shape_dtype_and_count_differences_are_notes() -> None:
    shape = compare_arrays(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not shape.close and shape.notes == ("output 0: shape (2, 3) vs (3, 2)",)
    kind = compare_arrays(np.zeros(2, np.int32), np.zeros(2, np.float32))
    assert not kind.close and "dtype" in kind.notes[0]
    count = compare_outputs([np.zeros(1)], [np.zeros(1), np.zeros(1)])
    assert count.notes == ("1 outputs vs 2",)


def test_outputs_combine_and_indices_name_the_output() -> None:
    result = compare_outputs(
        [np.array([1.0, 2.0]), np.array([[0.0, 5.0]])],
        [np.array([1.0, 2.0]), np.array([[0.0, 4.0]])],
    )
    assert result.mismatches == 1 and result.total == 4
    assert result.first_indices == ((1, 0, 1),)
    assert "1/4 elements differ" in result.summary()
    # Said as the report's table says it: the element's place, then its output (the first
    # only: the numbers keep the rest).
    assert result.summary().endswith("first at [0, 1] of output 1")
    assert result.numbers()["first_indices"] == [[1, 0, 1]]


def test_scalars_compare() -> None:
    assert compare_arrays(np.float32(2.0), np.float32(2.0)).close
    assert compare_arrays(np.float32(2.0), np.float32(3.0)).first_indices == ((0,),)


def test_a_nan_where_the_reference_has_a_number_is_said_as_such() -> None:
    expected = np.array([0.0308, np.nan, 2.0], np.float32)  # the masked entry: NaN in both
    nan_out = compare_arrays(np.array([np.nan, np.nan, 2.0], np.float32), expected)
    assert nan_out.nans == 2 and nan_out.new_nans == 1
    assert nan_out.summary() == (
        "1/3 elements differ (1 NaN where the reference has a number), first at [0] of output 0"
    )
    both = compare_arrays(np.array([np.nan, np.nan, 3.0], np.float32), expected)
    assert both.summary().startswith(
        "2/3 elements differ (max abs error inf, max rel error inf, 1 NaN where the reference "
        "has a number)"
    )


def test_a_reference_with_no_value_judges_no_output_there() -> None:
    # jit_total of tests/programs/wrong_then_lost_peer.py on the ``max`` extreme set (±float64's
    # largest, in turn): the module, partitioned over 6 devices, summed to NaN; the op-by-op
    # reference is NaN there too, as the order of that sum decides whether it overflows
    # (``open_nan``), and an infinity some other order gives is not judged either.
    for actual in (NAN, INF, -INF, 0.0):
        result = compare_arrays(np.array(actual), np.array(NAN), open_nan=True)
        assert result.close and result.unreferenced == 1 and result.max_abs == 0.0
    # Without it, a NaN reference still judges an infinity, and a number where the
    # reference is one still judges a NaN (the verdict this case first had).
    assert compare_arrays(np.array(INF), np.array(NAN)).mismatches == 1
    assert compare_outputs([np.array(NAN)], [np.array(0.0)], open_nan=True).summary() == (
        "1/1 elements differ (1 NaN where the reference has a number), first at [] of output 0"
    )


def test_on_inputs_made_to_overflow_two_different_overflows_are_not_judged() -> None:
    inf, nan = np.inf, np.nan
    actual = np.array([nan, -inf, inf, nan, 5.0, 1.0, inf], np.float32)
    expected = np.array([inf, inf, inf, 1.0, inf, 1.0, nan], np.float32)
    plain = compare_arrays(actual, expected)
    assert plain.mismatches == 5 and plain.overflowed == 0  # all but 1/1 and inf/inf
    c = compare_arrays(actual, expected, finite_only=True)
    # NaN against inf, -inf against inf, inf against NaN: what an overflow ends in, not
    # judged. A number on either side is judged as ever: a NaN where the reference has 1,
    # and 5 where it is inf.
    assert c.overflowed == 3 and c.mismatches == 2
    assert [i[1] for i in c.first_indices] == [3, 4]
    assert c.new_nans == 1 and c.nans == 2 and c.unreferenced == 0
    assert c.numbers()["overflowed"] == 3 and "overflowed" not in plain.numbers()
    combined = compare_outputs([actual, actual], [expected, expected], finite_only=True)
    assert combined.overflowed == 6 and combined.mismatches == 4
