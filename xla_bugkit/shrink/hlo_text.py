"""Edits of a module's entry computation, as jaxlib-printed parsable HLO text.

Pure text work (no XLA here: the shrink parent must not touch it). A ``Candidate`` is the
entry's instruction list plus where each entry parameter's value comes from: an argument of
the original module, or an intermediate value of the original run (a cut). Every edit keeps
parameter numbers contiguous, since jaxlib's parser aborts the process on a gap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import parser
from xla_bugkit.hlo.parser import Instruction

_LAYOUT = re.compile(r"(\])\{[^}]*\}")
_PARAMETER_NUMBER = re.compile(r"parameter\(\d+\)")
# The header attribute that pins the entry's signature; a moved root or a new parameter
# would contradict it (the parser then rejects the module).
_ENTRY_LAYOUT = re.compile(r", entry_computation_layout=\{")


@dataclass(frozen=True)
class Source:
    """Where a parameter's value comes from: argument ``index``, the value of instruction
    ``value`` in the original run, or (neither) seeded data."""

    index: int | None = None
    value: str | None = None

    def to_json(self) -> dict[str, object]:
        if self.index is not None:
            return {"argument": self.index}
        return {"value": self.value} if self.value is not None else {"generated": True}


@dataclass(frozen=True)
class Candidate:
    header: str  # "HloModule name, ..." without the entry layout
    entry_name: str
    computations: dict[str, list[str]]  # every non-entry computation, in module order
    entry: tuple[Instruction, ...]  # post order; exactly one is_root
    sources: tuple[Source, ...]  # by parameter number

    @property
    def root(self) -> Instruction:
        return next(i for i in self.entry if i.is_root)

    def instruction_count(self) -> int:
        """Instructions in the entry and every computation it reaches."""
        return len(self.entry) + sum(
            sum(1 for line in self.computations[name][1:-1] if line.strip())
            for name in self.reached()
        )

    def reached(self) -> list[str]:
        needed: set[str] = set()
        todo = [n for i in self.entry for n in parser.called_computations([i.line])]
        while todo:
            name = todo.pop()
            if name not in needed and name in self.computations:
                needed.add(name)
                todo.extend(parser.called_computations(self.computations[name]))
        return [name for name in self.computations if name in needed]

    def text(self) -> str:
        lines = [self.header, ""]
        for name in self.reached():
            lines.extend([*self.computations[name], ""])
        lines.append(f"ENTRY {self.entry_name} {{")
        lines.extend(f"  {'ROOT ' if i.is_root else ''}{i.line}" for i in self.entry)
        lines.extend(["}", ""])
        return "\n".join(lines)


def _without_entry_layout(header: str) -> str:
    found = _ENTRY_LAYOUT.search(header)
    if found is None:
        return header
    end = parser.closing_bracket(header, found.end() - 1)
    return header[: found.start()] + header[end + 1 :]


def parse(text: str) -> Candidate:
    """The candidate of a whole module, as jaxlib printed it (``jaxlib_adapter.module_text``)."""
    module = parser.parse_module(text)
    entry_name = next(
        (n for n, lines in module.computations.items() if lines[0].startswith("ENTRY ")), None
    )
    if entry_name is None:
        raise BugkitError("no entry computation in the HLO text")
    header = _without_entry_layout(text.split("\n", 1)[0])
    others = {n: lines for n, lines in module.computations.items() if n != entry_name}
    params = sorted((parameter_number(i), i) for i in module.entry if i.opcode == "parameter")
    sources = tuple(Source(index=n) for n, _ in params)
    return Candidate(header, entry_name, others, tuple(module.entry), sources)


def parameter_number(instruction: Instruction) -> int:
    return int(instruction.line.split("parameter(", 1)[1].split(")", 1)[0])


def is_array(instruction: Instruction) -> bool:
    """An array value (not a tuple, token or opaque value): only these can be cut."""
    shape = instruction.shape
    return not shape.startswith(("(", "token", "opaque")) and "[" in shape


def plain_shape(shape: str) -> str:
    """``f32[4,8]{1,0}`` -> ``f32[4,8]``: a new parameter takes the default layout."""
    return _LAYOUT.sub(r"\1", shape)


def _uses(line: str, name: str) -> bool:
    return re.search(rf"(?<![\w.\-]){re.escape(name)}(?![\w.\-])", line) is not None


def _rename(instruction: Instruction, old: str, new: str) -> Instruction:
    head, _, tail = instruction.line.partition(" = ")
    tail = re.sub(rf"(?<![\w.\-]){re.escape(old)}(?![\w.\-])", new, tail)
    operands = tuple(new if o == old else o for o in instruction.operands)
    return replace(instruction, line=f"{head} = {tail}", operands=operands)


def _live(entry: tuple[Instruction, ...]) -> set[str]:
    by_name = {i.name: i for i in entry}
    live: set[str] = set()
    todo = [next(i.name for i in entry if i.is_root)]
    while todo:
        name = todo.pop()
        if name in live or name not in by_name:
            continue
        live.add(name)
        todo.extend(o for o in by_name[name].operands if o in by_name)
    return live


def settle(c: Candidate, entry: tuple[Instruction, ...], sources: list[Source]) -> Candidate:
    """Dead code dropped, parameters renumbered 0..n-1 in order, their sources kept."""
    live = _live(entry)
    kept: list[Instruction] = []
    new_sources: list[Source] = []
    for i in entry:
        if i.name not in live:
            continue
        if i.opcode == "parameter":
            old = parameter_number(i)
            line = _PARAMETER_NUMBER.sub(f"parameter({len(new_sources)})", i.line)
            new_sources.append(sources[old])
            i = replace(i, line=line)
        kept.append(i)
    return replace(c, entry=tuple(kept), sources=tuple(new_sources))


def with_root(c: Candidate, name: str) -> Candidate:
    """``name`` made the root, and what it does not need dropped."""
    entry = tuple(replace(i, is_root=i.name == name) for i in c.entry)
    return settle(c, entry, list(c.sources))


def cut(c: Candidate, name: str) -> Candidate:
    """``name`` replaced by a new parameter that will hold its value; its operands die."""
    sources = [*c.sources, Source(value=name)]
    entry = []
    for i in c.entry:
        if i.name == name:
            shape = plain_shape(i.shape)
            line = f"{name} = {shape} parameter({len(sources) - 1})"
            i = replace(i, shape=shape, opcode="parameter", operands=(), line=line)
        entry.append(i)
    return settle(c, tuple(entry), sources)


def bypass(c: Candidate, name: str, operand: str) -> Candidate:
    """Every use of ``name`` reads ``operand`` (of the same shape) instead: a value-changing
    edit, for crashes only."""
    entry: list[Instruction] = []
    for i in c.entry:
        if i.name == name and i.is_root:
            entry = [replace(e, is_root=e.name == operand) for e in entry]
        if i.name != name:
            entry.append(_rename(i, name, operand) if _uses(i.line, name) else i)
    return settle(c, tuple(entry), list(c.sources))


def same_shape_operands(c: Candidate, instruction: Instruction) -> list[str]:
    shapes = {i.name: plain_shape(i.shape) for i in c.entry}
    mine = plain_shape(instruction.shape)
    return [o for o in dict.fromkeys(instruction.operands) if shapes.get(o) == mine]


def array_parameters_only(c: Candidate) -> bool:
    return all(is_array(i) for i in c.entry if i.opcode == "parameter")


def as_entry(c: Candidate, name: str) -> Candidate:
    """Computation ``name`` made the entry (hlo_bisect's ``--all_computations``), its callers
    gone. Its parameters take seeded data: no value of the original run stands for them, so
    this is an edit for crashes only."""
    lines = c.computations[name]
    others = [n for n in c.computations if n != name]
    body = [line for n in others for line in [*c.computations[n], ""]]
    text = "\n".join([c.header, "", *body, f"ENTRY {lines[0]}", *lines[1:], ""])
    promoted = parse(text)
    return replace(promoted, sources=tuple(Source() for _ in promoted.sources))
