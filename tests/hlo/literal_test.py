"""Tests for xla_bugkit.hlo.literal: LiteralProto <-> numpy, for every element type."""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tests.helpers.literals import sample
from tests.helpers.programs import literal_to_array
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo.hlo_proto import LiteralProto, PrimitiveType
from xla_bugkit.hlo.literal import (
    all_dtypes,
    format_shape,
    literal_to_numpy,
    numpy_to_literal,
    shape_of,
    type_name,
)

P = PrimitiveType

# Every element type the brief lists, with the ml_dtypes name it needs (None: plain numpy).
EXPECTED: dict[PrimitiveType, str | None] = {
    P.PRED: None, P.S8: None, P.S16: None, P.S32: None, P.S64: None,
    P.U8: None, P.U16: None, P.U32: None, P.U64: None,
    P.F16: None, P.F32: None, P.F64: None, P.C64: None, P.C128: None,
    P.BF16: "bfloat16", P.S4: "int4", P.U4: "uint4", P.S2: "int2", P.U2: "uint2",
    P.S1: "int1", P.U1: "uint1", P.F8E5M2: "float8_e5m2", P.F8E4M3FN: "float8_e4m3fn",
    P.F8E4M3B11FNUZ: "float8_e4m3b11fnuz", P.F8E5M2FNUZ: "float8_e5m2fnuz",
    P.F8E4M3FNUZ: "float8_e4m3fnuz", P.F8E4M3: "float8_e4m3", P.F8E3M4: "float8_e3m4",
    P.F8E8M0FNU: "float8_e8m0fnu", P.F4E2M1FN: "float4_e2m1fn",
}  # fmt: skip


def assert_identical(got: Any, want: np.ndarray) -> None:
    """Same dtype, shape and bits (so NaN payloads and -0.0 count)."""
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


def test_every_type_ml_dtypes_has_is_mapped() -> None:
    for ptype, ml_name in EXPECTED.items():
        if ml_name is None or hasattr(ml_dtypes, ml_name):
            assert ptype in all_dtypes(), ptype.name
    assert set(all_dtypes()) <= set(EXPECTED)


@pytest.mark.parametrize("ptype", sorted(all_dtypes()), ids=lambda p: p.name)
def test_round_trip_every_type(ptype: PrimitiveType) -> None:
    values = sample(ptype)
    lit = numpy_to_literal(values)
    assert lit.shape.element_type == ptype
    assert_identical(literal_to_numpy(LiteralProto.FromString(lit.SerializeToString())), values)


@pytest.mark.parametrize("ptype", sorted(all_dtypes()), ids=lambda p: p.name)
def test_round_trip_every_type_scalar_empty_and_column_major(ptype: PrimitiveType) -> None:
    values = sample(ptype)
    scalar = values[1:2].reshape(())
    assert_identical(literal_to_numpy(numpy_to_literal(scalar)), scalar)
    empty = values[:0].reshape(0, 3)
    assert_identical(literal_to_numpy(numpy_to_literal(empty)), empty)
    matrix = np.resize(values, (2, 3))
    assert_identical(literal_to_numpy(numpy_to_literal(matrix, minor_to_major=[0, 1])), matrix)


def test_scalar_has_no_dimensions() -> None:
    lit = numpy_to_literal(np.float32(2.5))
    assert list(lit.shape.dimensions) == []
    assert lit.shape.HasField("layout")
    assert shape_of(lit) == "f32[]"
    assert_identical(literal_to_numpy(lit), np.array(2.5, np.float32))


def test_python_scalars_take_numpy_default_types() -> None:
    assert shape_of(numpy_to_literal(True)) == "pred[]"
    assert shape_of(numpy_to_literal(3)) == "s64[]"
    assert shape_of(numpy_to_literal(1.5)) == "f64[]"


@pytest.mark.parametrize("dims", [(2, 3, 4), (1, 5, 1), (0, 2, 3)])
def test_every_layout_of_rank_3(dims: tuple[int, ...]) -> None:
    values = np.arange(int(np.prod(dims)), dtype=np.int16).reshape(dims)
    for layout in itertools.permutations(range(3)):
        lit = numpy_to_literal(values, minor_to_major=layout)
        assert list(lit.shape.layout.minor_to_major) == list(layout)
        assert_identical(literal_to_numpy(lit), values)


def test_values_are_stored_in_layout_order() -> None:
    lit = LiteralProto()
    lit.shape.element_type = P.S32
    lit.shape.dimensions.extend([2, 3])
    lit.shape.layout.minor_to_major.extend([0, 1])  # column-major
    lit.s32s.extend([1, 4, 2, 5, 3, 6])
    assert literal_to_array(lit).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert list(numpy_to_literal(np.array([[1, 2, 3], [4, 5, 6]]), minor_to_major=[0, 1]).s64s) == [
        1,
        4,
        2,
        5,
        3,
        6,
    ]


def test_missing_layout_means_row_major() -> None:
    lit = LiteralProto()
    lit.shape.element_type = P.U32
    lit.shape.dimensions.extend([2, 2])
    lit.u32s.extend([1, 2, 3, 4])
    assert literal_to_array(lit).tolist() == [[1, 2], [3, 4]]


def test_sub_byte_types_are_one_element_per_byte_in_the_low_bits() -> None:
    # As XLA writes them (seen in jaxlib 0.10.2 snapshots): not packed, not sign-extended.
    assert numpy_to_literal(np.array([-8, -1, 0, 7], ml_dtypes.int4)).s4s == b"\x08\x0f\x00\x07"
    assert numpy_to_literal(np.array([15, 1], ml_dtypes.uint4)).u4s == b"\x0f\x01"
    assert numpy_to_literal(np.array([-2, -1, 1], ml_dtypes.int2)).s2s == b"\x02\x03\x01"
    lit = numpy_to_literal(np.array([-6.0, 0.5], ml_dtypes.float4_e2m1fn))
    assert lit.f4e2m1fns == b"\x0f\x01"


def test_sixteen_bit_types_are_little_endian_bytes() -> None:
    assert numpy_to_literal(np.array([1.0], np.float16)).f16s == b"\x00\x3c"
    assert numpy_to_literal(np.array([1.0], ml_dtypes.bfloat16)).bf16s == b"\x80\x3f"
    assert numpy_to_literal(np.array([258], np.uint16)).u16s == b"\x02\x01"
    big_endian = np.array([-2, 258], dtype=">i2")
    lit = numpy_to_literal(big_endian)
    assert lit.s16s == b"\xfe\xff\x02\x01"
    assert literal_to_array(lit).tolist() == [-2, 258]


def test_complex_values_interleave_real_and_imaginary() -> None:
    lit = numpy_to_literal(np.array([1 + 2j, 3 - 4j], np.complex64))
    assert list(lit.c64s) == [1.0, 2.0, 3.0, -4.0]
    assert list(numpy_to_literal(np.array([5j])).c128s) == [0.0, 5.0]


def test_nested_tuples_round_trip() -> None:
    inner = (np.int8(-3), ())
    value = (np.arange(4, dtype=np.float32), inner, np.zeros((0,), ml_dtypes.bfloat16))
    lit = LiteralProto.FromString(numpy_to_literal(value).SerializeToString())
    assert shape_of(lit) == "(f32[4], (s8[], ()), bf16[0])"
    got = literal_to_numpy(lit)
    assert isinstance(got, tuple) and len(got) == 3
    assert_identical(got[0], value[0])
    assert isinstance(got[1], tuple)
    assert_identical(got[1][0], np.array(-3, np.int8))
    assert got[1][1] == ()
    assert_identical(got[2], value[2])


def test_empty_tuple() -> None:
    assert literal_to_numpy(numpy_to_literal(())) == ()


@pytest.mark.parametrize(
    ("ptype", "name"), [(P.TOKEN, "token"), (P.OPAQUE_TYPE, "opaque"), (99, "<type 99>")]
)
def test_types_numpy_cannot_hold_raise(ptype: int, name: str) -> None:
    lit = LiteralProto()
    lit.shape.element_type = ptype
    with pytest.raises(BugkitError) as err:
        literal_to_numpy(lit)
    assert str(err.value) == f"element type {name} cannot be held by this numpy/ml_dtypes"


def test_wrong_value_count_raises() -> None:
    lit = numpy_to_literal(np.zeros(3, np.float32))
    del lit.f32s[0]
    with pytest.raises(BugkitError, match=r"f32\[3\] holds 2 values"):
        literal_to_numpy(lit)


def test_ragged_bytes_raise() -> None:
    lit = numpy_to_literal(np.zeros(2, np.float16))
    lit.f16s = b"\x00\x00\x00"
    with pytest.raises(BugkitError, match="not whole elements"):
        literal_to_numpy(lit)


def test_bad_layout_raises() -> None:
    lit = numpy_to_literal(np.zeros((2, 2), np.float32))
    lit.shape.layout.minor_to_major[0] = 5
    with pytest.raises(BugkitError, match="bad layout"):
        literal_to_numpy(lit)
    with pytest.raises(BugkitError, match="does not fit"):
        numpy_to_literal(np.zeros((2, 2)), minor_to_major=[0])


def test_tuple_with_missing_elements_raises() -> None:
    lit = numpy_to_literal((np.int32(1), np.int32(2)))
    del lit.tuple_literals[1]
    with pytest.raises(BugkitError, match="wrong number of tuple elements"):
        literal_to_numpy(lit)


def test_literal_to_array_refuses_tuples() -> None:
    with pytest.raises(BugkitError, match=r"expected an array literal, got \(s32\[\]\)"):
        literal_to_array(numpy_to_literal((np.int32(1),)))


def test_dtype_without_xla_type_raises() -> None:
    with pytest.raises(BugkitError, match="has no XLA element type"):
        numpy_to_literal(np.array(["a"]))


def test_type_names_follow_xla() -> None:
    assert type_name(P.F8E4M3FN) == "f8e4m3fn"
    assert type_name(P.PRED) == "pred"
    assert format_shape(numpy_to_literal(np.zeros((2, 4), ml_dtypes.bfloat16)).shape) == (
        "bf16[2,4]"
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_float_values_are_written_as_the_field_a_list_would_make(dtype: type) -> None:
    # The packed bytes are handed to the parser directly: the message must be the one that
    # extending the repeated field value by value makes, byte for byte.
    values = np.arange(-6, 6, dtype=np.float64).reshape(3, 4).astype(dtype) / 7
    fast = numpy_to_literal(values)
    slow = LiteralProto()
    slow.shape.CopyFrom(fast.shape)
    field = next(f.name for f, _ in fast.ListFields() if f.name != "shape")
    flat = values.ravel()
    getattr(slow, field).extend(flat.view(flat.real.dtype).tolist())
    assert fast.SerializeToString() == slow.SerializeToString()
    np.testing.assert_array_equal(literal_to_numpy(fast), values)


def test_plain_types_convert_without_importing_ml_dtypes() -> None:
    """collect converts a run's float32 arguments after the program: ml_dtypes takes most of
    a second to import, paid only for a type that needs it."""
    code = (
        "import sys, numpy as np\n"
        "from xla_bugkit.hlo import literal\n"
        "lit = literal.numpy_to_literal(np.arange(6, dtype=np.float32).reshape(2, 3))\n"
        "assert literal.literal_to_numpy(lit).sum() == 15\n"
        "assert literal.dtype_of(literal.PrimitiveType.S32) == np.int32\n"
        "assert 'ml_dtypes' not in sys.modules, 'imported for float32'\n"
        "assert str(literal.dtype_of(literal.PrimitiveType.BF16)) == 'bfloat16'\n"
        "assert 'ml_dtypes' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
