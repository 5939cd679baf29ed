"""Protobuf's wire format, for the few places that edit XLA's protos without their classes.

jaxlib ships no Python bindings for CompileOptionsProto, DebugOptions or most of hlo.proto,
so a message is read here as what the wire says: (field number, wire type, bytes). Editing
one field and writing the rest back as they were keeps everything else byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, Protocol

from xla_bugkit.errors import BugkitError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

Buffer = bytes | bytearray | memoryview


class Readable(Protocol):
    """A binary file, plain or gzip-compressed."""

    def read(self, size: int = -1, /) -> bytes: ...


class Field(NamedTuple):
    number: int
    kind: int  # the wire type
    whole: Buffer  # the field as written: tag, length and payload
    payload: Buffer  # a varint's or fixed value's bytes; a length-delimited field's content


def read_varint(data: Buffer, at: int) -> tuple[int, int]:
    """The varint at ``at`` and the index after it."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise BugkitError("not protobuf data (bad varint)")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def fields(data: Buffer) -> Iterator[Field]:
    """Each top-level field of the message ``data``, in the order written.

    Slices of a ``memoryview`` are views, so walking a large message copies nothing.
    """
    for number, kind, start, at, end in spans(data):
        yield Field(number, kind, data[start:end], data[at:end])


def spans(data: Buffer) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire type, start, payload start, end) of each top-level field of ``data``:
    :func:`fields` as offsets, for walks over many fields that look at few of them."""
    at, size = 0, len(data)
    while at < size:
        start = at
        # One-byte varints (fields 1 to 15, lengths and values under 128) are the most
        # frequent by far: read inline, they halve the time of a walk.
        tag = data[at]
        if tag < 0x80:
            at += 1
        else:
            tag, at = read_varint(data, at)
        kind = tag & 7
        if kind == LENGTH:
            length = data[at] if at < size else 0x80
            if length < 0x80:
                at += 1
            else:
                length, at = read_varint(data, at)
            end = at + length
        elif kind == VARINT:
            end = at + 1 if at < size and data[at] < 0x80 else read_varint(data, at)[1]
        elif kind in (FIXED64, FIXED32):
            end = at + (8 if kind == FIXED64 else 4)
        else:  # groups (3, 4) are used by none of XLA's messages
            raise BugkitError(f"not protobuf data (wire type {kind})")
        if end > size or tag >> 3 == 0:
            raise BugkitError("not protobuf data (truncated)")
        yield tag >> 3, kind, start, at, end
        at = end


def length_field(number: int, payload: Buffer) -> bytes:
    """A length-delimited field: its tag, its length, then ``payload``."""
    return length_head(number, len(payload)) + bytes(payload)


def length_head(number: int, size: int) -> bytes:
    """A length-delimited field's tag and length: what goes before its ``size`` bytes."""
    return encode_varint(number << 3 | LENGTH) + encode_varint(size)


def read_header(stream: Readable) -> tuple[int, int, bytes, int] | None:
    """The next field of ``stream``: its number, wire type, the bytes read so far (its tag;
    a varint's value; a length-delimited field's length) and how many bytes of it are still
    to read. None at the end of the stream."""
    first = stream.read(1)
    if not first:
        return None
    tag_bytes = _stream_varint(stream, first)
    tag, _ = read_varint(tag_bytes, 0)
    number, kind = tag >> 3, tag & 7
    if number == 0:
        raise BugkitError("not protobuf data (field 0)")
    if kind == VARINT:
        return number, kind, tag_bytes + _stream_varint(stream), 0
    if kind in (FIXED64, FIXED32):
        return number, kind, tag_bytes, 8 if kind == FIXED64 else 4
    if kind == LENGTH:
        size_bytes = _stream_varint(stream)
        return number, kind, tag_bytes + size_bytes, read_varint(size_bytes, 0)[0]
    raise BugkitError(f"not protobuf data (wire type {kind})")


def _stream_varint(stream: Readable, first: bytes = b"") -> bytes:
    out = bytearray(first)
    while not out or out[-1] >= 0x80:
        if len(out) >= 10:
            raise BugkitError("not protobuf data (bad varint)")
        byte = stream.read(1)
        if not byte:
            raise BugkitError("not protobuf data (truncated)")
        out += byte
    return bytes(out)
