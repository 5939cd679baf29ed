"""Convert XLA ``LiteralProto`` values to numpy arrays and back.

Wire format, as XLA's ``literal.cc`` (``WriteToProto``/``CopyFromProto``) writes it and as
seen in jaxlib 0.10.2 snapshots:

* values are stored in the order of the shape's layout (``minor_to_major``);
* 32/64-bit types and pred go in repeated fields; complex values interleave real and imag;
* 8-bit and 16-bit types are raw bytes, 16-bit ones little-endian;
* sub-byte types (s4/u4/s2/u2/s1/u1, f4e2m1fn) are *not* packed: one element per byte,
  the value in the low bits, upper bits zero (-1 as s4 is 0x0f). That is also ml_dtypes'
  in-memory layout, so the bytes copy straight through.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import protowire
from xla_bugkit.hlo.hlo_proto import LiteralProto, PrimitiveType, ProtoMessage

# A decoded literal: an array, or a tuple of decoded literals.
Value = np.ndarray | tuple["Value", ...]

_P = PrimitiveType


class _Codec(NamedTuple):
    field: str  # the LiteralProto field holding the values
    dtype: np.dtype[Any]
    kind: str  # "repeated", "bytes" or "complex"


_PLAIN: dict[PrimitiveType, _Codec] = {
    _P.PRED: _Codec("preds", np.dtype(np.bool_), "repeated"),
    _P.S32: _Codec("s32s", np.dtype(np.int32), "repeated"),
    _P.S64: _Codec("s64s", np.dtype(np.int64), "repeated"),
    _P.U32: _Codec("u32s", np.dtype(np.uint32), "repeated"),
    _P.U64: _Codec("u64s", np.dtype(np.uint64), "repeated"),
    _P.F32: _Codec("f32s", np.dtype(np.float32), "repeated"),
    _P.F64: _Codec("f64s", np.dtype(np.float64), "repeated"),
    _P.C64: _Codec("c64s", np.dtype(np.complex64), "complex"),
    _P.C128: _Codec("c128s", np.dtype(np.complex128), "complex"),
    _P.S8: _Codec("s8s", np.dtype(np.int8), "bytes"),
    _P.U8: _Codec("u8s", np.dtype(np.uint8), "bytes"),
    _P.S16: _Codec("s16s", np.dtype(np.int16), "bytes"),
    _P.U16: _Codec("u16s", np.dtype(np.uint16), "bytes"),
    _P.F16: _Codec("f16s", np.dtype(np.float16), "bytes"),
}

# The types only ml_dtypes holds, each stored as bytes: (field, ml_dtypes' name).
_ML: dict[PrimitiveType, tuple[str, str]] = {
    _P.BF16: ("bf16s", "bfloat16"),
    _P.S4: ("s4s", "int4"),
    _P.U4: ("u4s", "uint4"),
    _P.S2: ("s2s", "int2"),
    _P.U2: ("u2s", "uint2"),
    _P.S1: ("s1s", "int1"),
    _P.U1: ("u1s", "uint1"),
    _P.F8E5M2: ("f8e5m2s", "float8_e5m2"),
    _P.F8E4M3FN: ("f8e4m3fns", "float8_e4m3fn"),
    _P.F8E4M3B11FNUZ: ("f8e4m3b11fnuzs", "float8_e4m3b11fnuz"),
    _P.F8E5M2FNUZ: ("f8e5m2fnuzs", "float8_e5m2fnuz"),
    _P.F8E4M3FNUZ: ("f8e4m3fnuzs", "float8_e4m3fnuz"),
    _P.F8E4M3: ("f8e4m3s", "float8_e4m3"),
    _P.F8E3M4: ("f8e3m4s", "float8_e3m4"),
    _P.F8E8M0FNU: ("f8e8m0fnus", "float8_e8m0fnu"),
    _P.F4E2M1FN: ("f4e2m1fns", "float4_e2m1fn"),
}


@functools.cache
def _ml_codecs() -> dict[PrimitiveType, _Codec]:
    """The ``_ML`` types this ml_dtypes holds: imported only when one is met, as it takes
    most of a second (collect converts a run's float32 arguments without it)."""
    import ml_dtypes

    codecs = {}
    for ptype, (field, name) in _ML.items():
        # Older ml_dtypes lack the newer float8/int types; those stay unmapped, not an error.
        if (scalar := getattr(ml_dtypes, name, None)) is not None:
            codecs[ptype] = _Codec(field, np.dtype(scalar), "bytes")
    return codecs


def dtype_of(element_type: int) -> np.dtype[Any] | None:
    """The dtype an element type decodes to; None for one numpy/ml_dtypes cannot hold."""
    try:
        return _codec(element_type).dtype
    except BugkitError:
        return None


def all_dtypes() -> dict[PrimitiveType, np.dtype[Any]]:
    """Every element type this numpy/ml_dtypes can hold, and the dtype each decodes to."""
    return {p: c.dtype for p, c in {**_PLAIN, **_ml_codecs()}.items()}


_BY_PLAIN: dict[np.dtype[Any], PrimitiveType] = {c.dtype: p for p, c in _PLAIN.items()}


def wire_form(element_type: int) -> tuple[int, str, str]:
    """How a ``LiteralProto`` stores an element type's values, for a reader without proto
    classes (repro.py): the field's number, numpy's name for the type, and the values' form:
    ``fixed`` (little-endian floats, complex ones as pairs), ``varint`` (packed integers) or
    ``bytes`` (little-endian, one element per byte for the sub-byte types)."""
    codec = _codec(element_type)
    number = LiteralProto.DESCRIPTOR.fields_by_name[codec.field].number
    if codec.kind == "bytes":
        return number, codec.dtype.name, "bytes"
    fixed = codec.kind == "complex" or codec.dtype.kind == "f"
    return number, codec.dtype.name, "fixed" if fixed else "varint"


def type_name(element_type: int) -> str:
    """XLA's short name of an element type: ``f32``, ``bf16``, ``f8e4m3fn``, ``pred``..."""
    try:
        name = PrimitiveType(element_type).name
    except ValueError:
        return f"<type {element_type}>"
    return "opaque" if name == "OPAQUE_TYPE" else name.lower()


def format_shape(shape: ProtoMessage) -> str:
    """Describe a ``ShapeProto`` as XLA prints it: ``f32[2,4]``, ``(s8[], bf16[3])``."""
    if shape.element_type == _P.TUPLE:
        return "(" + ", ".join(format_shape(s) for s in shape.tuple_shapes) + ")"
    dims = ",".join(str(d) for d in shape.dimensions)
    return f"{type_name(shape.element_type)}[{dims}]"


def shape_of(lit: ProtoMessage) -> str:
    """Describe a ``LiteralProto``'s shape, e.g. ``f32[2,4]``."""
    return format_shape(lit.shape)


def _codec(element_type: int) -> _Codec:
    try:
        ptype = PrimitiveType(element_type)
        return _PLAIN.get(ptype) or _ml_codecs()[ptype]
    except (ValueError, KeyError):
        raise BugkitError(
            f"element type {type_name(element_type)} cannot be held by this numpy/ml_dtypes"
        ) from None


def _packed_floats(lit: ProtoMessage, field: str, dtype: np.dtype[Any]) -> np.ndarray:
    """A packed float or double field's values, read from its wire bytes (a Python list of a
    few hundred MB of values would take seconds)."""
    number = lit.DESCRIPTOR.fields_by_name[field].number
    data = memoryview(lit.SerializeToString())
    chunks = [
        f.payload
        for f in protowire.fields(data)
        if f.number == number and f.kind == protowire.LENGTH
    ]
    wire = np.frombuffer(b"".join(chunks), dtype=dtype.newbyteorder("<"))
    return wire.astype(dtype.newbyteorder("="))


def _flat_values(lit: ProtoMessage, codec: _Codec) -> np.ndarray:
    raw = getattr(lit, codec.field)
    if codec.kind == "repeated" and codec.dtype.kind == "f":
        return _packed_floats(lit, codec.field, codec.dtype)
    if codec.kind == "repeated":
        return np.array(raw, dtype=codec.dtype)
    if codec.kind == "complex":
        part = np.dtype(np.float32 if codec.dtype.itemsize == 8 else np.float64)
        parts = _packed_floats(lit, codec.field, part)
        if parts.size % 2:
            raise BugkitError(f"literal {shape_of(lit)}: odd number of complex parts")
        return parts.view(codec.dtype)
    width = codec.dtype.itemsize
    if len(raw) % width:
        raise BugkitError(f"literal {shape_of(lit)}: {len(raw)} bytes is not whole elements")
    wire = np.frombuffer(raw, dtype=np.dtype(f"<u{width}"))
    return wire.astype(f"=u{width}").view(codec.dtype)


def _major_to_minor(shape: ProtoMessage) -> list[int]:
    rank = len(shape.dimensions)
    if not shape.HasField("layout") or not shape.layout.minor_to_major:
        return list(range(rank))
    order = list(reversed(shape.layout.minor_to_major))
    if sorted(order) != list(range(rank)):
        raise BugkitError(f"literal {format_shape(shape)}: bad layout {order[::-1]}")
    return order


def _array(lit: ProtoMessage) -> np.ndarray:
    shape = lit.shape
    codec = _codec(shape.element_type)
    flat = _flat_values(lit, codec)
    dims = [int(d) for d in shape.dimensions]
    if flat.size != int(np.prod(dims, dtype=np.int64)):
        raise BugkitError(f"literal {format_shape(shape)} holds {flat.size} values")
    order = _major_to_minor(shape)
    physical = flat.reshape([dims[d] for d in order])
    return physical.transpose(np.argsort(order)).copy()


def literal_to_numpy(lit: ProtoMessage) -> Value:
    """Decode a ``LiteralProto``: an array (rank 0 for scalars), or for a tuple literal a
    Python tuple of decoded elements. Raises ``BugkitError`` for malformed literals and
    for element types numpy/ml_dtypes cannot hold."""
    if lit.shape.element_type == _P.TUPLE:
        if len(lit.tuple_literals) != len(lit.shape.tuple_shapes):
            raise BugkitError(f"literal {shape_of(lit)}: wrong number of tuple elements")
        return tuple(literal_to_numpy(element) for element in lit.tuple_literals)
    return _array(lit)


def _element_type(array: np.ndarray) -> PrimitiveType:
    dtype = array.dtype.newbyteorder("=")
    if (ptype := _BY_PLAIN.get(dtype)) is not None:
        return ptype
    try:  # an ml_dtypes array: ml_dtypes is loaded already
        return next(p for p, c in _ml_codecs().items() if c.dtype == dtype)
    except StopIteration:
        raise BugkitError(f"numpy dtype {array.dtype} has no XLA element type") from None


def _set_values(
    lit: ProtoMessage, codec: _Codec, flat: np.ndarray, aside: list[protowire.Buffer] | None = None
) -> None:
    if codec.kind == "complex":
        flat = flat.view(flat.real.dtype)
    if codec.kind in ("repeated", "complex") and flat.dtype.kind == "f":
        # A packed float or double field is the values' little-endian bytes: handed to the
        # parser as such, not as a Python list (seconds for a few hundred MB); or, ``aside``,
        # kept out of the message as the field's wire bytes, never copied into it.
        number = lit.DESCRIPTOR.fields_by_name[codec.field].number
        little = np.ascontiguousarray(flat.astype(flat.dtype.newbyteorder("<"), copy=False))
        if aside is not None:
            aside += [protowire.length_head(number, little.nbytes), little.data.cast("B")]
            return
        lit.MergeFromString(protowire.length_field(number, little.tobytes()))
    elif codec.kind in ("repeated", "complex"):
        getattr(lit, codec.field).extend(flat.tolist())
    else:
        width = codec.dtype.itemsize
        setattr(lit, codec.field, flat.view(f"=u{width}").astype(f"<u{width}").tobytes())


def _array_literal(
    array: np.ndarray,
    minor_to_major: Sequence[int] | None,
    aside: list[protowire.Buffer] | None = None,
) -> ProtoMessage:
    ptype = _element_type(array)
    codec = _codec(ptype)
    rank = array.ndim
    layout = list(range(rank - 1, -1, -1)) if minor_to_major is None else list(minor_to_major)
    if sorted(layout) != list(range(rank)):
        raise BugkitError(f"layout {layout} does not fit an array of rank {rank}")
    lit = LiteralProto()
    lit.shape.element_type = ptype
    lit.shape.dimensions.extend(array.shape)
    # XLA always writes a layout (even an empty one) and one dynamic flag per dimension.
    lit.shape.layout.SetInParent()
    lit.shape.layout.minor_to_major.extend(layout)
    lit.shape.is_dynamic_dimension.extend([False] * rank)
    native = array.astype(array.dtype.newbyteorder("="), copy=False)
    _set_values(lit, codec, native.transpose(layout[::-1]).ravel(), aside)
    return lit


def numpy_to_literal(value: Any, *, minor_to_major: Sequence[int] | None = None) -> ProtoMessage:
    """Encode an array (or numpy/Python scalar) as a ``LiteralProto``; a tuple becomes a
    tuple literal, recursively. ``minor_to_major`` picks the layout of an array (default
    row-major); it does not apply to tuples."""
    if isinstance(value, tuple):
        if minor_to_major is not None:
            raise ValueError("minor_to_major applies to arrays, not tuples")
        lit = LiteralProto()
        lit.shape.element_type = _P.TUPLE
        for element in value:
            child = lit.tuple_literals.add()
            child.CopyFrom(numpy_to_literal(element))
            lit.shape.tuple_shapes.add().CopyFrom(child.shape)
        return lit
    return _array_literal(np.asarray(value), minor_to_major)


def numpy_to_wire(value: Any) -> tuple[ProtoMessage, list[protowire.Buffer]]:
    """``numpy_to_literal(value)`` serialized, as parts to write one after another, and the
    literal without its float values (its shape, for checks): a snapshot's gigabytes of
    weights go to the file from the array itself, never copied into a message and out."""
    if isinstance(value, tuple):
        lit = numpy_to_literal(value)
        return lit, [lit.SerializeToString()]
    aside: list[protowire.Buffer] = []
    head = _array_literal(np.asarray(value), None, aside)
    return head, [head.SerializeToString(), *aside]
