"""Edits inside any computation of a module, the called ones included (while bodies and
conditions, ``call`` targets, conditional branches, reduce, map and fusion computations).

Pure text work, like ``hlo_text``. A called computation's signature never changes: its
parameters stay and its root keeps its shape, so every caller stays valid. The edits:

- dead code dropped (value-preserving);
- a ``call`` inlined into its caller (value-preserving: the entry's cuts then reach what it
  called);
- an instruction replaced by a same-shaped value already at hand: a parameter, an element of
  a parameter tuple, or one of its operands; or by zeros (for crashes: values change);
- a ``while`` or ``call`` bypassed to a same-shaped operand, its computations gone (crashes).

Instructions keep an order where every operand comes first; new names take the form
``base.N``, which the failure signature's normalisation maps like the original ids.
"""

from __future__ import annotations

import re
from dataclasses import replace

from xla_bugkit.hlo import parser
from xla_bugkit.hlo.parser import Instruction
from xla_bugkit.shrink import hlo_text
from xla_bugkit.shrink.hlo_text import Candidate

_OPCODE = re.compile(r"\s*(?P<op>[\w\-]+)\(")
_SCALAR = re.compile(r"^(?P<type>[a-z]+\d*[a-z0-9]*)\[(?P<dims>[\d,]*)\]")
_ID = re.compile(r"\.\d+$")
_INDEX = re.compile(r"\bindex=(\d+)")
_LOOP = re.compile(r"\bcondition=(?P<condition>[\w.\-]+), body=(?P<body>[\w.\-]+)")
# Opcodes whose value is no plain computation of their operands: replacing them says little.
_LEAVES = frozenset({"parameter", "constant", "iota", "get-tuple-element", "tuple"})
_ZERO = {"pred": "false"}


def instructions(c: Candidate, computation: str) -> list[Instruction]:
    """The instructions of ``computation`` (the entry's name for the entry), in order."""
    if computation == c.entry_name:
        return list(c.entry)
    body = [line for line in c.computations[computation][1:-1] if line.strip()]
    return parser.parse_module("\n".join(["ENTRY e {", *body, "}"])).entry


def computations(c: Candidate) -> list[str]:
    """The entry, then every computation it reaches."""
    return [c.entry_name, *c.reached()]


def taken_names(c: Candidate) -> set[str]:
    names = {i.name for i in c.entry}
    for name in c.reached():
        names.update(i.name for i in instructions(c, name))
    return names


def fresh_name(name: str, taken: set[str]) -> str:
    base, n = _ID.sub("", name), 1
    while f"{base}.{n}" in taken:
        n += 1
    taken.add(f"{base}.{n}")
    return f"{base}.{n}"


def with_operands(i: Instruction, mapping: dict[str, str], name: str | None = None) -> Instruction:
    """``i`` reading ``mapping[o]`` for each operand ``o`` it maps (and renamed ``name``)."""
    new_name = name or i.name
    rest = i.line.partition(" = ")[2]
    if not any(o in mapping for o in i.operands):
        return replace(i, name=new_name, line=f"{new_name} = {rest}")
    shape_end = parser.closing_bracket(rest, 0) + 1 if rest.startswith("(") else rest.index(" ")
    op = _OPCODE.match(rest, shape_end)
    assert op is not None  # opbyop parsed this line already
    close = parser.closing_bracket(rest, op.end() - 1)
    operands = tuple(mapping.get(o, o) for o in i.operands)
    rest = rest[: op.end()] + ", ".join(operands) + rest[close:]
    return replace(i, name=new_name, operands=operands, line=f"{new_name} = {rest}")


def _ordered(instrs: list[Instruction]) -> list[Instruction]:
    """Operands before users, otherwise in the given order."""
    by_name = {i.name: i for i in instrs}
    done: dict[str, Instruction] = {}
    for first in instrs:
        stack = [(first, False)]
        while stack:
            i, expanded = stack.pop()
            if i.name in done:
                continue
            if expanded:
                done[i.name] = i
                continue
            stack.append((i, True))
            for o in reversed(i.operands):
                if o in by_name and o not in done:
                    stack.append((by_name[o], False))
    return list(done.values())


def _live(instrs: list[Instruction]) -> set[str]:
    by_name = {i.name: i for i in instrs}
    live: set[str] = set()
    todo = [i.name for i in instrs if i.is_root]
    while todo:
        name = todo.pop()
        if name not in live and name in by_name:
            live.add(name)
            todo.extend(by_name[name].operands)
    return live


def with_instructions(c: Candidate, computation: str, instrs: list[Instruction]) -> Candidate:
    """``c`` with ``computation`` holding ``instrs``; dead code dropped (a called
    computation's parameters stay: they are its signature)."""
    instrs = _ordered(instrs)
    if computation == c.entry_name:
        return hlo_text.settle(c, tuple(instrs), list(c.sources))
    live = _live(instrs)
    kept = [i for i in instrs if i.name in live or i.opcode == "parameter"]
    lines = c.computations[computation]
    body = [f"  {'ROOT ' if i.is_root else ''}{i.line}" for i in kept]
    return replace(c, computations={**c.computations, computation: [lines[0], *body, lines[-1]]})


def dead_code(c: Candidate, computation: str) -> Candidate:
    return with_instructions(c, computation, instructions(c, computation))


def replace_uses(c: Candidate, computation: str, name: str, by: str) -> Candidate:
    """Every use of ``name`` reads ``by`` instead (the root moves to it); ``name`` goes."""
    instrs = instructions(c, computation)
    was_root = any(i.is_root for i in instrs if i.name == name)
    edited = [
        replace(with_operands(i, {name: by}), is_root=i.is_root or (was_root and i.name == by))
        for i in instrs
        if i.name != name
    ]
    return with_instructions(c, computation, edited)


def stand_ins(c: Candidate, computation: str, target: Instruction) -> list[str]:
    """Same-shaped values at hand for ``target``: its operands, then the computation's
    parameters and the elements taken from them (nothing that depends on ``target``)."""
    instrs = instructions(c, computation)
    shape = hlo_text.plain_shape(target.shape)
    params = {i.name for i in instrs if i.opcode == "parameter"}
    at_hand = [
        i.name
        for i in instrs
        if i.opcode == "parameter" or (i.opcode == "get-tuple-element" and i.operands[0] in params)
    ]
    shapes = {i.name: hlo_text.plain_shape(i.shape) for i in instrs}
    found = [n for n in dict.fromkeys([*target.operands, *at_hand]) if shapes.get(n) == shape]
    return [n for n in found if n != target.name]


def zeros(c: Candidate, computation: str, name: str) -> Candidate | None:
    """``name`` replaced by zeros of its shape (a broadcast scalar constant), or None."""
    instrs = instructions(c, computation)
    target = next(i for i in instrs if i.name == name)
    found = _SCALAR.match(target.shape)
    if found is None or not hlo_text.is_array(target):
        return None
    scalar = f"{found.group('type')}[]"
    zero = _ZERO.get(found.group("type"), "0")
    if not found.group("dims"):
        new = [
            replace(
                target, opcode="constant", operands=(), line=f"{name} = {scalar} constant({zero})"
            )
        ]
    else:
        const = fresh_name("constant", taken_names(c))
        shape = hlo_text.plain_shape(target.shape)
        new = [
            Instruction(
                const, scalar, "constant", (), f"{const} = {scalar} constant({zero})", is_root=False
            ),
            replace(
                target,
                opcode="broadcast",
                operands=(const,),
                line=f"{name} = {shape} broadcast({const}), dimensions={{}}",
            ),
        ]
    at = instrs.index(target)
    return with_instructions(c, computation, [*instrs[:at], *new, *instrs[at + 1 :]])


def forward_tuples(c: Candidate) -> Candidate:
    """Every ``get-tuple-element`` of a ``tuple`` instruction reads that tuple's operand
    instead, in every computation (value-preserving: what inlining leaves behind)."""
    for computation in computations(c):
        instrs = instructions(c, computation)
        by_name = {i.name: i for i in instrs}
        mapping: dict[str, str] = {}
        for i in instrs:
            source = by_name.get(i.operands[0]) if i.opcode == "get-tuple-element" else None
            index = _INDEX.search(i.line)
            if source is not None and source.opcode == "tuple" and index is not None:
                mapping[i.name] = source.operands[int(index.group(1))]
        if not mapping:
            continue
        for old in list(mapping):  # a chain of forwards ends at a value that is no forward
            while mapping[old] in mapping:
                mapping[old] = mapping[mapping[old]]
        root = next(i.name for i in instrs if i.is_root)
        root = mapping.get(root, root)
        edited = [replace(with_operands(i, mapping), is_root=i.name == root) for i in instrs]
        c = with_instructions(c, computation, edited)
    return c


def call_sites(c: Candidate) -> list[tuple[str, str]]:
    """(computation, instruction) of every ``call``, the entry's first."""
    return [
        (comp, i.name)
        for comp in computations(c)
        for i in instructions(c, comp)
        if i.opcode == "call"
    ]


def inline(c: Candidate, computation: str, name: str) -> Candidate:
    """The ``call`` ``name`` in ``computation`` replaced by the body of what it calls."""
    instrs = instructions(c, computation)
    call = next(i for i in instrs if i.name == name)
    (callee,) = parser.called_computations([call.line])
    body = instructions(c, callee)
    mapping = {
        i.name: call.operands[hlo_text.parameter_number(i)] for i in body if i.opcode == "parameter"
    }
    root = next(i for i in body if i.is_root)
    if root.opcode == "parameter":  # the call passes an operand through
        return replace_uses(c, computation, name, mapping[root.name])
    taken = taken_names(c)
    for i in body:
        if i.opcode != "parameter":
            mapping[i.name] = name if i is root else fresh_name(i.name, taken)
    inlined = [
        replace(with_operands(i, mapping, mapping[i.name]), is_root=call.is_root and i is root)
        for i in body
        if i.opcode != "parameter"
    ]
    at = instrs.index(call)
    return with_instructions(c, computation, [*instrs[:at], *inlined, *instrs[at + 1 :]])


def inline_all(c: Candidate) -> Candidate:
    """Every ``call`` of the module inlined, nested ones too."""
    while sites := call_sites(c):
        c = inline(c, *sites[0])
    return c


def targets(c: Candidate, computation: str) -> list[Instruction]:
    """The instructions worth replacing in ``computation``, nearest the root first."""
    instrs = instructions(c, computation)
    by_name = {i.name: i for i in instrs}
    seen: dict[str, None] = {}
    layer = [i.name for i in instrs if i.is_root]
    while layer:
        following: list[str] = []
        for name in layer:
            if name not in seen and name in by_name:
                seen[name] = None
                following.extend(by_name[name].operands)
        layer = following
    return [by_name[n] for n in seen if by_name[n].opcode not in _LEAVES]


def _cone(instrs: list[Instruction], roots: list[str]) -> set[str]:
    by_name = {i.name: i for i in instrs}
    found: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in found and name in by_name:
            found.add(name)
            todo.extend(by_name[name].operands)
    return found


def loop_control(c: Candidate) -> dict[str, set[str]]:
    """By computation, the instructions that decide how often a while loop runs: all of its
    condition, and in its body what computes the elements the condition reads. Changing
    their values can make a loop endless, a hang instead of the bug."""
    found: dict[str, set[str]] = {}
    for computation in computations(c):
        for i in instructions(c, computation):
            loop = _LOOP.search(i.line) if i.opcode == "while" else None
            if loop is None or loop["condition"] not in c.computations:
                continue
            condition = instructions(c, loop["condition"])
            found.setdefault(loop["condition"], set()).update(x.name for x in condition)
            params = {x.name for x in condition if x.opcode == "parameter"}
            reads = [x for x in condition if params & set(x.operands)]
            body = instructions(c, loop["body"]) if loop["body"] in c.computations else []
            root = next((x for x in body if x.is_root), None)
            if root is None:
                continue
            if root.opcode != "tuple" or any(x.opcode != "get-tuple-element" for x in reads):
                found.setdefault(loop["body"], set()).update(x.name for x in body)
                continue
            indices = [m.group(1) for x in reads if (m := _INDEX.search(x.line))]
            roots = [root.operands[int(n)] for n in indices if int(n) < len(root.operands)]
            found.setdefault(loop["body"], set()).update(_cone(body, roots))
    return found
