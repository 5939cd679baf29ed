"""A wire-compatible subset of XLA's protos, built at import time without protoc.

jaxlib ships no Python bindings for ``HloSnapshot``/``HloProto``/``LiteralProto``, and
TensorFlow is too heavy a dependency, so the few messages xla-bugkit reads are declared here
from a ``FileDescriptorProto`` in a private pool and package (``xla_bugkit.xla``), which
cannot clash with a real ``xla`` package that another library may have registered.

Fields that are not declared survive parsing as unknown fields and are written back
verbatim, so a module read here and serialized again is still a whole HloModuleProto.
"""

from __future__ import annotations

import enum
import gzip
import os
import zlib
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import protowire

# Classes made by GetMessageClass carry no static types; this alias names what they are.
ProtoMessage = Any

_PACKAGE = "xla_bugkit.xla"
_F = descriptor_pb2.FieldDescriptorProto

# Why fields are declared as they are: protobuf writes known fields in number order and then
# the unknown ones as they were read. C++ writes all fields in number order, so a message
# whose known fields form a prefix of its numbers (only higher numbers left unknown)
# re-serializes byte for byte, which lets a bundle carry XLA's bytes unchanged.


class PrimitiveType(enum.IntEnum):
    """XLA element types (xla_data.proto ``PrimitiveType``)."""

    PRIMITIVE_TYPE_INVALID = 0
    PRED = 1
    S8 = 2
    S16 = 3
    S32 = 4
    S64 = 5
    U8 = 6
    U16 = 7
    U32 = 8
    U64 = 9
    F16 = 10
    F32 = 11
    F64 = 12
    TUPLE = 13
    OPAQUE_TYPE = 14
    C64 = 15
    BF16 = 16
    TOKEN = 17
    C128 = 18
    F8E5M2 = 19
    F8E4M3FN = 20
    S4 = 21
    U4 = 22
    F8E4M3B11FNUZ = 23
    F8E5M2FNUZ = 24
    F8E4M3FNUZ = 25
    S2 = 26
    U2 = 27
    F8E4M3 = 28
    F8E3M4 = 29
    S1 = 30
    U1 = 31
    F4E2M1FN = 32
    F8E8M0FNU = 33


# (name, number, type, label, message or enum type name) per field.
_Field = tuple[str, int, int, int, str]
_OPT = _F.LABEL_OPTIONAL
_REP = _F.LABEL_REPEATED

# LiteralProto's fields other than shape(1) and tuple_literals(10): (name, number, type).
_LITERAL_VALUES: list[tuple[str, int, int]] = [
    ("preds", 2, _F.TYPE_BOOL),
    ("u8s", 3, _F.TYPE_BYTES),
    ("s32s", 4, _F.TYPE_INT32),
    ("s64s", 5, _F.TYPE_INT64),
    ("u32s", 6, _F.TYPE_UINT32),
    ("u64s", 7, _F.TYPE_UINT64),
    ("f32s", 8, _F.TYPE_FLOAT),
    ("f64s", 9, _F.TYPE_DOUBLE),
    ("f16s", 11, _F.TYPE_BYTES),
    ("c64s", 12, _F.TYPE_FLOAT),
    ("bf16s", 13, _F.TYPE_BYTES),
    ("sparse_indices", 14, _F.TYPE_INT64),  # obsolete; declared to keep numbers contiguous
    ("s8s", 15, _F.TYPE_BYTES),
    ("u16s", 16, _F.TYPE_BYTES),
    ("s16s", 17, _F.TYPE_BYTES),
    ("c128s", 18, _F.TYPE_DOUBLE),
    ("f8e5m2s", 19, _F.TYPE_BYTES),
    ("f8e4m3fns", 20, _F.TYPE_BYTES),
    ("s4s", 21, _F.TYPE_BYTES),
    ("u4s", 22, _F.TYPE_BYTES),
    ("f8e4m3b11fnuzs", 23, _F.TYPE_BYTES),
    ("f8e5m2fnuzs", 24, _F.TYPE_BYTES),
    ("f8e4m3fnuzs", 25, _F.TYPE_BYTES),
    ("s2s", 26, _F.TYPE_BYTES),
    ("u2s", 27, _F.TYPE_BYTES),
    ("f8e4m3s", 28, _F.TYPE_BYTES),
    ("f8e3m4s", 29, _F.TYPE_BYTES),
    ("s1s", 30, _F.TYPE_BYTES),
    ("u1s", 31, _F.TYPE_BYTES),
    ("f4e2m1fns", 32, _F.TYPE_BYTES),
    ("f8e8m0fnus", 33, _F.TYPE_BYTES),
]


def _literal_fields() -> list[_Field]:
    fields: list[_Field] = [("shape", 1, _F.TYPE_MESSAGE, _OPT, "ShapeProto")]
    for name, number, ftype in _LITERAL_VALUES:
        label = _OPT if ftype == _F.TYPE_BYTES else _REP
        fields.append((name, number, ftype, label, ""))
    fields.append(("tuple_literals", 10, _F.TYPE_MESSAGE, _REP, "LiteralProto"))
    return sorted(fields, key=lambda field: field[1])


_MESSAGES: dict[str, list[_Field]] = {
    "LayoutProto": [("minor_to_major", 1, _F.TYPE_INT64, _REP, "")],
    "ShapeProto": [
        ("element_type", 2, _F.TYPE_ENUM, _OPT, "PrimitiveType"),
        ("dimensions", 3, _F.TYPE_INT64, _REP, ""),
        ("tuple_shapes", 4, _F.TYPE_MESSAGE, _REP, "ShapeProto"),
        ("layout", 5, _F.TYPE_MESSAGE, _OPT, "LayoutProto"),
        ("is_dynamic_dimension", 6, _F.TYPE_BOOL, _REP, ""),
    ],
    "LiteralProto": _literal_fields(),
    "HloModuleProto": [
        ("name", 1, _F.TYPE_STRING, _OPT, ""),
        ("entry_computation_name", 2, _F.TYPE_STRING, _OPT, ""),
        # Raw bytes (same wire type as the real messages): declared only to keep fields
        # 1-6 a prefix, so re-serialization stays byte-exact (see above).
        ("computations", 3, _F.TYPE_BYTES, _REP, ""),
        ("host_program_shape", 4, _F.TYPE_BYTES, _OPT, ""),
        ("id", 5, _F.TYPE_INT64, _OPT, ""),
        ("entry_computation_id", 6, _F.TYPE_INT64, _OPT, ""),
    ],
    # HloModuleProto.host_program_shape's bytes: the entry's parameters, read on their own.
    "ProgramShapeProto": [
        ("parameters", 1, _F.TYPE_MESSAGE, _REP, "ShapeProto"),
        ("result", 2, _F.TYPE_MESSAGE, _OPT, "ShapeProto"),
        ("parameter_names", 3, _F.TYPE_STRING, _REP, ""),
    ],
    "HloProto": [("hlo_module", 1, _F.TYPE_MESSAGE, _OPT, "HloModuleProto")],
    "HloSnapshot": [
        ("hlo", 1, _F.TYPE_MESSAGE, _OPT, "HloProto"),
        ("arguments", 2, _F.TYPE_MESSAGE, _REP, "LiteralProto"),
        ("result", 3, _F.TYPE_MESSAGE, _OPT, "LiteralProto"),
        ("execution_platform", 4, _F.TYPE_STRING, _OPT, ""),
    ],
}


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    # proto3, like xla_data.proto/hlo.proto: open enums and packed repeated scalars.
    fdp = descriptor_pb2.FileDescriptorProto(
        name="xla_bugkit/xla_subset.proto", package=_PACKAGE, syntax="proto3"
    )
    enum_proto = fdp.enum_type.add(name="PrimitiveType")
    for member in PrimitiveType:
        enum_proto.value.add(name=member.name, number=member.value)
    for message_name, fields in _MESSAGES.items():
        message = fdp.message_type.add(name=message_name)
        for name, number, ftype, label, type_name in fields:
            field = message.field.add(name=name, number=number, type=ftype, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    return fdp


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file_descriptor())


def _message_class(name: str) -> ProtoMessage:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


LayoutProto: ProtoMessage = _message_class("LayoutProto")
ShapeProto: ProtoMessage = _message_class("ShapeProto")
LiteralProto: ProtoMessage = _message_class("LiteralProto")
HloModuleProto: ProtoMessage = _message_class("HloModuleProto")
ProgramShapeProto: ProtoMessage = _message_class("ProgramShapeProto")
HloProto: ProtoMessage = _message_class("HloProto")
HloSnapshot: ProtoMessage = _message_class("HloSnapshot")

_GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """A file's bytes, gunzipped when it is gzip data (by content, not suffix)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BugkitError(f"cannot read {os.fspath(path)}: {e.strerror or e}") from e
    # By content, not suffix: 0x1f cannot start a protobuf (wire type 7 does not exist).
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise BugkitError(f"{os.fspath(path)}: corrupt gzip data ({e})") from e


def _parse(path: str | os.PathLike[str], cls: ProtoMessage) -> ProtoMessage:
    message = cls()
    try:
        message.ParseFromString(read_bytes(path))
    except DecodeError as e:
        # protobuf's own text names our private package; the user needs only the fact.
        what = f"not a valid {cls.__name__} (corrupt protobuf data)"
        raise BugkitError(f"{os.fspath(path)}: {what}") from e
    return message


def _require_module(path: str | os.PathLike[str], hlo: ProtoMessage, what: str) -> None:
    # Garbage (or an empty file) can parse as a message of unknown fields; a real dump
    # always names its module, so that is the check that it is what it claims to be.
    if not hlo.HasField("hlo_module") or not hlo.hlo_module.name:
        raise BugkitError(f"{os.fspath(path)}: not a valid {what} (no named HLO module)")


def read_snapshot(path: str | os.PathLike[str]) -> ProtoMessage:
    """Read an ``HloSnapshot`` (``*.snapshot.*.pb``, optionally gzip-compressed).

    Raises ``BugkitError`` naming the file when it cannot be read or is not a snapshot.
    """
    snapshot = _parse(path, HloSnapshot)
    _require_module(path, snapshot.hlo, "HloSnapshot")
    return snapshot


def argument_shapes(path: str | os.PathLike[str]) -> list[ProtoMessage]:
    """The shapes of a snapshot's arguments, read without reading their values: a header
    and a shape per argument, the rest skipped (a training step's snapshot holds its whole
    state). Raises ``BugkitError`` naming the file when it is not one."""
    try:
        with open(path, "rb") as raw:
            compressed = raw.read(2) == _GZIP_MAGIC
            raw.seek(0)
            f: Any = gzip.GzipFile(fileobj=raw) if compressed else raw
            shapes = []
            while (header := protowire.read_header(f)) is not None:
                number, kind, _, size = header
                if number == 2 and kind == protowire.LENGTH:
                    shapes.append(_literal_shape(f, size))
                else:
                    _skip(f, size)
            return shapes
    except (OSError, EOFError, zlib.error, DecodeError, BugkitError) as e:
        what = getattr(e, "strerror", None) or e
        raise BugkitError(f"{os.fspath(path)}: not a readable HloSnapshot ({what})") from e


def _literal_shape(f: Any, size: int) -> ProtoMessage:
    """The shape of the literal of ``size`` bytes at ``f``'s position; ``f`` is left after it.
    XLA writes a literal's shape (field 1) first; a literal that puts it elsewhere is read
    whole."""
    if size == 0:
        return ShapeProto()
    header = protowire.read_header(f)
    if header is None:
        raise BugkitError("truncated")
    number, kind, head, length = header
    if len(head) + (length if kind == protowire.LENGTH else 0) > size:
        raise BugkitError("a field longer than its literal")
    if number != 1 or kind != protowire.LENGTH:
        literal = LiteralProto()
        literal.ParseFromString(head + _read(f, size - len(head)))
        return literal.shape
    shape = ShapeProto()
    shape.ParseFromString(_read(f, length))
    _skip(f, size - len(head) - length)
    return shape


def _read(f: Any, size: int) -> bytes:
    data = f.read(size)
    if len(data) != size:
        raise BugkitError("truncated")
    return bytes(data)


def _skip(f: Any, size: int) -> None:
    """Past ``size`` bytes, which must be there."""
    if size <= 0:
        return
    f.seek(size - 1, os.SEEK_CUR)
    if len(f.read(1)) != 1:
        raise BugkitError("truncated")


def read_hlo_proto(path: str | os.PathLike[str]) -> ProtoMessage:
    """Read an ``HloProto`` (``*.hlo.pb`` or ``*.hlo.pb.gz``).

    Raises ``BugkitError`` naming the file when it cannot be read or is not an HloProto.
    """
    hlo = _parse(path, HloProto)
    _require_module(path, hlo, "HloProto")
    return hlo


def module_bytes(hlo_proto: ProtoMessage) -> bytes:
    """The serialized ``HloModuleProto`` of an ``HloProto``: what jaxlib's
    ``hlo_to_stablehlo`` takes. Byte-identical to the field as XLA wrote it."""
    data: bytes = hlo_proto.hlo_module.SerializeToString()
    return data


def parameter_shapes(hlo_proto: ProtoMessage) -> list[ProtoMessage]:
    """The ``ShapeProto`` of each entry parameter of an ``HloProto``'s module, in order."""
    shape = ProgramShapeProto()
    try:
        shape.ParseFromString(hlo_proto.hlo_module.host_program_shape)
    except DecodeError as e:
        raise BugkitError(f"module {hlo_proto.hlo_module.name}: corrupt program shape") from e
    return list(shape.parameters)


def make_snapshot(hlo: bytes, arguments: Sequence[ProtoMessage]) -> bytes:
    """A serialized ``HloSnapshot`` of a serialized ``HloProto`` and argument literals
    (no result: none was read back)."""
    return b"".join(snapshot_parts(hlo, [[a.SerializeToString()] for a in arguments]))


def snapshot_parts(
    hlo: protowire.Buffer, arguments: Sequence[Sequence[protowire.Buffer]]
) -> list[protowire.Buffer]:
    """``make_snapshot``'s bytes as parts to write one after another, each argument given
    as the parts of its serialized literal (``literal.numpy_to_wire``)."""
    # The fields in number order, as a serializer writes them: no copy into a message.
    parts = [protowire.length_head(1, len(hlo)), hlo]
    for argument in arguments:
        parts += [protowire.length_head(2, sum(len(p) for p in argument)), *argument]
    return parts
