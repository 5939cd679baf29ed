"""Take the recorded flags out of a PJRT folder's ``compile_options.pb``.

A serialized CompileOptionsProto carries the DebugOptions in force when JAX compiled the
module, and any per-compile overrides the program passed. A replay whose flags the user gives
by hand must not keep them: XLA would start from the recorded debug options and apply the
given flags on top, so a recorded ``--xla_disable_all_hlo_passes=true`` would stay in force.
jaxlib's ``CompileOptions`` cannot reset its debug options, and no Python bindings for these
protos ship with it, so this edits protobuf's wire format directly: just enough to drop
fields, everything else passes through byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator

from xla_bugkit.errors import BugkitError

# Field numbers (xla/pjrt/proto/compile_options.proto; checked against jaxlib 0.10.2).
EXECUTABLE_BUILD_OPTIONS = 3  # CompileOptionsProto: ExecutableBuildOptionsProto
ENV_OPTION_OVERRIDES = 7  # CompileOptionsProto: map<string, OptionOverrideProto>
DEBUG_OPTIONS = 3  # ExecutableBuildOptionsProto: xla.DebugOptions
DEVICE_ASSIGNMENT = 9  # ExecutableBuildOptionsProto: xla.DeviceAssignmentProto

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at`` and the index after it."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise BugkitError("compile_options.pb is not a CompileOptionsProto (bad varint)")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(number, wire type, the whole field as written, its payload) for each top-level field."""
    at = 0
    while at < len(data):
        start = at
        tag, at = _varint(data, at)
        kind = tag & 7
        if kind == _VARINT:
            _, end = _varint(data, at)
        elif kind in (_FIXED64, _FIXED32):
            end = at + (8 if kind == _FIXED64 else 4)
        elif kind == _LENGTH:
            size, at = _varint(data, at)
            end = at + size
        else:  # groups (3, 4) are not used by these messages
            raise BugkitError(f"compile_options.pb is not a CompileOptionsProto (wire type {kind})")
        if end > len(data):
            raise BugkitError("compile_options.pb is not a CompileOptionsProto (truncated)")
        yield tag >> 3, kind, data[start:end], data[at:end]
        at = end


def _rewrite(
    data: bytes, drop: frozenset[int], inside: int | None = None, edit: frozenset[int] = frozenset()
) -> bytes:
    """``data`` without the fields ``drop``; field ``inside`` (a message) loses ``edit``."""
    out = bytearray()
    for number, kind, whole, payload in _fields(data):
        if number in drop:
            continue
        if number == inside and kind == _LENGTH and edit:
            inner = _rewrite(payload, edit)
            out += _encode_varint(number << 3 | _LENGTH) + _encode_varint(len(inner)) + inner
        else:
            out += whole
    return bytes(out)


def without_recorded_flags(serialized: bytes) -> bytes:
    """``serialized`` less its debug options and per-compile overrides.

    A compile from the result starts from the process's XLA_FLAGS, as a fresh compile does,
    and takes the overrides given with it; layouts, device assignment and partitioning stay.
    """
    return _rewrite(
        serialized, frozenset({ENV_OPTION_OVERRIDES}), EXECUTABLE_BUILD_OPTIONS,
        frozenset({DEBUG_OPTIONS}),
    )  # fmt: skip


def without_device_assignment(serialized: bytes) -> bytes:
    """``serialized`` less the recorded device assignment, which names the reporter's
    devices (those of a second ``jax.distributed`` rank are numbered from 2048): a replay
    compiles for the devices it is given here. Replica and partition counts stay."""
    return _rewrite(
        serialized, frozenset(), EXECUTABLE_BUILD_OPTIONS, frozenset({DEVICE_ASSIGNMENT})
    )
