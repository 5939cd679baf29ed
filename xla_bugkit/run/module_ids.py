"""The dumped module of each compilation a process recorded without its id.

The hook records a compilation's module name and its parameters' MLIR types, not the
number XLA gives the module (``module_NNNN`` in the dump's file names). Module numbers grow
in compile order, so the k-th compilation of ``jit_f`` is the next ``jit_f`` dumped after the
previous match. Compilations that ran at once on several threads are numbered by XLA in an
order of its own: each takes the module whose parameters (the first line of its
``before_optimizations.txt``) have the dimensions it compiled for.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from xla_bugkit.hlo.names import program_name

# The file every compiled module gets first (collect dumps text and protos of each).
_BEFORE = re.compile(r"^(?:\d+\.)?module_(\d+)\.(.+)\.before_optimizations\.(?:txt|hlo\.pb)$")
# An array type in a compile record's MLIR types (``tensor<8x4xf32>``: its dimensions), and
# in the parameters of a dumped module's entry layout (``f32[8,4]{1,0}``).
_MLIR_DIMS = re.compile(r"tensor<((?:\d+x)*)")
_HLO_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([\d,]*)\]")
_HEADER_BYTES = 1 << 20  # of a module's first line, which lists its parameters


@dataclass
class _Dumped:
    """A module dumped in a folder, and whether a compilation record was given it."""

    id: int
    name: str
    text: Path | None  # its before_optimizations.txt, whose first line lists its parameters
    taken: bool = False

    @cached_property
    def dims(self) -> tuple[tuple[int, ...], ...] | None:
        """Its parameters' dimensions, from its header (``HloModule jit_f,
        entry_computation_layout={(f32[8]{0}, s32[]{:T(256)})->...}``); None if unread."""
        if self.text is None:
            return None
        try:
            with self.text.open(encoding="utf-8", errors="replace") as f:
                header = f.readline(_HEADER_BYTES)
        except OSError:
            return None
        layout = header.partition("entry_computation_layout={(")[2].partition(")->")[0]
        arrays = _HLO_ARRAY.findall(layout)
        return tuple(_numbers(d, ",") for t, d in arrays if t != "token")


def _numbers(text: str, sep: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split(sep) if d)


def _mlir_dims(shapes: str) -> tuple[tuple[int, ...], ...]:
    """The dimensions of each array parameter in a compile record's ``shapes``."""
    return tuple(_numbers(d, "x") for d in _MLIR_DIMS.findall(shapes))


def _dumped(folder: Path) -> list[_Dumped]:
    """Each module dumped directly in ``folder``, in id order."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found: dict[tuple[int, str], Path | None] = {}
    for n in names:
        if m := _BEFORE.match(n):
            key = (int(m.group(1)), m.group(2))
            text = folder / n if n.endswith(".txt") else None
            found[key] = found.get(key) or text
    return [_Dumped(i, name, text) for (i, name), text in sorted(found.items())]


def fill(ordered: list[dict[str, Any]], dump_dir: Path | None) -> None:
    """Give compilations without an id the id of their module in the dump: module ids grow
    in compile order, so the k-th compilation of ``jit_f`` is the next ``jit_f`` dumped after
    the previous match. Compilations that ran at once (threads) are numbered by XLA in any
    order: where the next is not the module of the compilation's own parameters, a later
    one of the same name that is takes it. Executions take the id of the compilation they
    ran."""
    cursors: dict[Path, tuple[list[_Dumped], int]] = {}
    by_n: dict[int, dict[str, Any]] = {}
    for r in ordered:
        if r["e"] != "compile":
            continue
        by_n[r["n"]] = r
        folder = Path(r["dump_to"]) if isinstance(r.get("dump_to"), str) else dump_dir
        if folder is None or isinstance(r.get("id"), int):
            continue
        dumped, at = cursors.get(folder) or (_dumped(folder), 0)
        name = str(r.get("module") or "")
        same = [
            i
            for i in range(at, len(dumped))
            if program_name(dumped[i].name) == name and not dumped[i].taken
        ]
        hit = _own_parameters(dumped, same, str(r.get("shapes") or ""))
        if hit is not None:
            r["id"], dumped[hit].taken = dumped[hit].id, True
            at = hit + 1 if hit == same[0] else at  # the earlier one is another's
        cursors[folder] = (dumped, at)
    for r in ordered:
        compiled = by_n.get(r["c"]) if r["e"] == "execute" and isinstance(r.get("c"), int) else None
        if compiled is not None and not isinstance(r.get("id"), int):
            r["id"] = compiled.get("id")


def _own_parameters(dumped: list[_Dumped], same: list[int], shapes: str) -> int | None:
    """Of the modules ``same`` (indexes into ``dumped``, of one name), the first whose
    parameters have the dimensions ``shapes`` names; the first of all where none has, or
    where their parameters cannot be told."""
    if len(same) < 2 or not shapes:
        return same[0] if same else None
    want = _mlir_dims(shapes)
    return next((i for i in same if dumped[i].dims == want), same[0])
