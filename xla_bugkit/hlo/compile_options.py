"""What a replay takes from a PJRT folder's ``compile_options.pb``: an allowlist of fields.

A serialized CompileOptionsProto carries the layouts and partitioning a module was compiled
with, the DebugOptions in force and any per-compile overrides the program passed. A bundle
comes from a stranger: its debug options could name a folder to dump into or a cache to write,
so a replay keeps only the fields known to be safe and takes the overrides by name, through
the same rule as every other recorded option (``flags.refusal``). jaxlib's
``CompileOptions`` cannot reset its debug options, and no Python bindings for these protos
ship with it, so this reads protobuf's wire format directly: the kept fields pass through
byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import flags, protowire

# One recorded per-compile override's value, as OptionOverrideProto holds it.
Override = bool | int | float | str | None

# Field numbers (xla/pjrt/proto/compile_options.proto; checked against jaxlib 0.10.2).
EXECUTABLE_BUILD_OPTIONS = 3  # CompileOptionsProto: ExecutableBuildOptionsProto
ENV_OPTION_OVERRIDES = 7  # CompileOptionsProto: map<string, OptionOverrideProto>
DEBUG_OPTIONS = 3  # ExecutableBuildOptionsProto: xla.DebugOptions
DEVICE_ASSIGNMENT = 9  # ExecutableBuildOptionsProto: xla.DeviceAssignmentProto

# The fields a replay keeps, by allowlist: what shapes the program (layouts, replicas and
# partitions, the partitioner, effort levels, a GPU target's description) and cannot name a
# file. CompileOptionsProto: argument layouts, tupled arguments, the build options (below),
# portable executable, profile version, multi-slice config, GPU target config, in-place MLIR,
# matrix unit precision. Left out: the overrides (7: by name, through ``flags.refusal``) and
# the deprecated compiler variant (11), a string.
_KEPT = frozenset({1, 2, EXECUTABLE_BUILD_OPTIONS, 4, 5, 6, 8, 9, 10})
# ExecutableBuildOptionsProto: everything but the debug options (3), the compilation
# environments (13: Any messages, each a backend's own flags) and the device assignment (9).
_BUILD_KEPT = frozenset(
    {1, 2, 4, 5, 6, 7, 8, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}
)
_TOP, _BUILD = "CompileOptionsProto", "ExecutableBuildOptionsProto"
# Dropped from every bundle (the overrides are read apart): not worth a note.
_EXPECTED_DROPS = frozenset(
    {f"{_TOP}.{ENV_OPTION_OVERRIDES}", f"{_BUILD}.{DEBUG_OPTIONS}", f"{_BUILD}.{DEVICE_ASSIGNMENT}"}
)


def _fields(data: protowire.Buffer) -> Iterator[protowire.Field]:
    """Each top-level field of ``data``; bytes that are no protobuf message are refused."""
    try:
        yield from protowire.fields(data)
    except BugkitError as e:  # "not protobuf data (truncated)": say which file it was
        detail = str(e).partition("(")[2].rstrip(")")
        raise BugkitError(f"compile_options.pb is not a CompileOptionsProto ({detail})") from None


def _keep(data: protowire.Buffer, kept: frozenset[int], where: str, dropped: list[str]) -> bytes:
    """``data`` (the message ``where``) with only the fields ``kept``, the build options
    among them filtered in turn; the others are named in ``dropped``."""
    out = bytearray()
    for number, kind, whole, payload in _fields(data):
        if number not in kept:
            dropped.append(f"{where}.{number}")
        elif where == _TOP and number == EXECUTABLE_BUILD_OPTIONS and kind == protowire.LENGTH:
            inner = _keep(payload, _BUILD_KEPT, _BUILD, dropped)
            out += protowire.length_field(number, inner)
        else:
            out += whole
    return bytes(out)


def _text(payload: protowire.Buffer) -> str:
    return bytes(payload).decode("utf-8", "replace")


def _override(entry: protowire.Buffer) -> tuple[str, Override]:
    """One ``env_option_overrides`` map entry: (option name, its value)."""
    name, value = "", None
    for number, kind, _, payload in _fields(entry):
        if number == 1 and kind == protowire.LENGTH:
            name = _text(payload)
        elif number == 2 and kind == protowire.LENGTH:
            for field, field_kind, _, raw in _fields(payload):
                value = _override_value(field, field_kind, raw)
    return name, value


def _override_value(field: int, kind: int, raw: protowire.Buffer) -> Override:
    """An OptionOverrideProto's value: string (1), bool (2), int64 (3) or double (4)."""
    if field == 1 and kind == protowire.LENGTH:
        return _text(raw)
    if field in (2, 3) and kind == protowire.VARINT:
        number = protowire.read_varint(raw, 0)[0]
        if field == 2:
            return bool(number)
        return number - (1 << 64) if number >= 1 << 63 else number
    if field == 4 and kind == protowire.FIXED64:
        return float(struct.unpack("<d", raw)[0])
    return None


@dataclass(frozen=True)
class ForReplay:
    """A stranger's CompileOptionsProto as a replay may take it."""

    serialized: bytes  # the allowlisted fields, no debug options, overrides or devices
    overrides: tuple[tuple[str, bool | str], ...]  # the recorded overrides a replay may apply
    withheld: tuple[str, ...]  # what was left out, one line each


def for_replay(serialized: bytes) -> ForReplay:
    """What a replay takes from ``serialized``: layouts, partitioning and build settings as
    recorded; the recorded per-compile overrides that ``flags.refusal`` allows, apart.

    The recorded debug options are never applied: they are binary, and whether a field of
    theirs is a number or a path only the proto schema of the XLA that wrote them tells. The
    options in force reach a replay by name instead (the ``debug_options`` dump and the
    process's flags), through ``flags.admit``. The device assignment names the reporter's
    devices (a second ``jax.distributed`` rank's are numbered from 2048): a replay compiles
    for the devices it is given here.
    """
    dropped: list[str] = []
    kept = _keep(serialized, _KEPT, _TOP, dropped)
    overrides: list[tuple[str, bool | str]] = []
    withheld: list[str] = []
    for number, kind, _, payload in _fields(serialized):
        if number != ENV_OPTION_OVERRIDES or kind != protowire.LENGTH:
            continue
        name, value = _override(payload)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        why = flags.refusal(name, text)
        if why is not None or value is None:
            withheld.append(f"{name[:100]}={text[:100]} ({why or 'no value'})")
        else:
            # jaxlib takes a bool field's value as a bool, any other as its text.
            overrides.append((name, value if isinstance(value, bool) else str(value)))
    unknown = [name for name in dropped if name not in _EXPECTED_DROPS]
    if unknown:
        withheld.append(f"compile options fields {', '.join(unknown)} (not known to be safe)")
    return ForReplay(kept, tuple(overrides), tuple(withheld))
