"""HLO text as jaxlib prints it, split into computations and instructions.

jaxlib's own printer (``jaxlib_adapter.module_text``) writes well-formed text, so this only needs to
find the computations, the entry's instructions and the computations each one calls; it is
not a full HLO parser. The op-by-op reference (``replay.opbyop``) and shrink's editing of
modules (``shrink.hlo_text``, ``shrink.inner``) read modules through it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xla_bugkit.errors import BugkitError

# An HLO value: an array or a (nested) tuple of them. A shape tree mirrors it, with the
# leaf shapes as HLO text.
Value = np.ndarray | tuple["Value", ...]
ShapeTree = str | list["ShapeTree"]

_HEADER = re.compile(r"^(?P<entry>ENTRY )?(?P<name>[\w.\-]+) (?:\(.*\) -> .* )?\{$")
_INSTR = re.compile(r"^\s*(?P<root>ROOT )?(?P<name>[\w.\-]+) = (?P<rest>.*)$")
_OPCODE = re.compile(r"\s*(?P<op>[\w\-]+)\(")
_CALLED = re.compile(
    r"\b(?:to_apply|calls|body|condition|true_computation|false_computation|select|scatter|"
    r"branch_computations)=(?P<names>\{[^}]*\}|[\w.\-]+)"
)


class HloTextError(BugkitError):
    """The HLO text is not as jaxlib prints it; the message quotes it."""


@dataclass(frozen=True)
class Instruction:
    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    line: str  # the instruction as printed, without "ROOT "
    is_root: bool


@dataclass(frozen=True)
class Module:
    entry: list[Instruction]
    computations: dict[str, list[str]]  # name -> its lines, in the module's order


_CUSTOM_CALL_TARGET = re.compile(r'custom_call_target="([^"]+)"')


def custom_call_targets(text: str) -> list[str]:
    """The custom-call targets an HLO module's text calls, in the order it calls them."""
    return _CUSTOM_CALL_TARGET.findall(text)


def closing_bracket(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start`` (brackets of any kind nest)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i
    raise HloTextError(f"unbalanced brackets in HLO: {text[:80]}")


def split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return [*parts, tail] if tail else parts


def parse_shape(text: str) -> ShapeTree:
    """``(f32[2]{0}, (s32[], pred[]))`` -> ``["f32[2]{0}", ["s32[]", "pred[]"]]``."""
    text = text.strip()
    if not text.startswith("("):
        return text
    return [parse_shape(part) for part in split_top(text[1 : closing_bracket(text, 0)])]


def parse_instruction(line: str) -> Instruction:
    m = _INSTR.match(line)
    if m is None:
        raise HloTextError(f"cannot read HLO instruction: {line.strip()[:120]}")
    rest = m.group("rest")
    shape_end = closing_bracket(rest, 0) + 1 if rest.startswith("(") else rest.index(" ")
    op = _OPCODE.match(rest, shape_end)
    if op is None:
        raise HloTextError(f"cannot read HLO instruction: {line.strip()[:120]}")
    close = closing_bracket(rest, op.end() - 1)
    inside = rest[op.end() : close]
    # A constant's parentheses hold its literal and a parameter's its number, not operands.
    simple = op.group("op") not in ("constant", "parameter")
    operands = tuple(split_top(inside)) if simple else ()
    text = f"{m.group('name')} = {rest}"
    return Instruction(
        m.group("name"), rest[:shape_end], op.group("op"), operands, text, bool(m.group("root"))
    )


def parse_module(text: str) -> Module:
    """Split jaxlib-printed HLO text into computations and the entry's instructions."""
    computations: dict[str, list[str]] = {}
    entry: list[Instruction] = []
    current: list[str] | None = None
    is_entry = False
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header and current is None:
            current, is_entry = [line], bool(header.group("entry"))
            computations[header.group("name")] = current
        elif current is not None:
            current.append(line)
            if line == "}":
                current = None
            elif is_entry:
                entry.append(parse_instruction(line))
    if not entry:
        raise HloTextError("no entry computation in the HLO text")
    return Module(entry, computations)


def called_computations(lines: Sequence[str]) -> list[str]:
    """The computations these instruction lines call (to_apply, body, ...), as named."""
    names: list[str] = []
    for line in lines:
        for m in _CALLED.finditer(line):
            names.extend(n.strip() for n in m.group("names").strip("{}").split(",") if n.strip())
    return names
