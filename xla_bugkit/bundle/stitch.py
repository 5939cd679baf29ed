"""A job's global inputs, put together from the shards each part saved (``merge``).

A call over the devices of several processes has no process that holds its inputs whole:
each part keeps its own shards, each with its place in the global array
(``run.shards``). With every part of the job there, each global input of a module all the
parts compiled alike is assembled (the shards must tile it; where replicas of one place
differ, the failing part's are taken and the difference said), and written as the module's
snapshot, which ``verify`` and repro.py replay as they replay one process's recorded
inputs. Where a part is missing, or its shards do not tile the array, the module keeps no
inputs, and the note says why.

A part is a stranger's file: what it claims of an array (its global shape, each shard's
place) is checked against the shards it holds before anything is allocated for it.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit.archive import plan
from xla_bugkit.bundle import members
from xla_bugkit.bundle.parts import Part
from xla_bugkit.choose.dumps import Role
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import hlo_proto
from xla_bugkit.proc import leftovers
from xla_bugkit.run import arguments, shards


@dataclass
class Stitched:
    """What stitching found: the snapshot written for each module (its label -> (member
    name, file)), and what a reader must know (replicas that differ, parts missing)."""

    snapshots: dict[str, tuple[str, Path]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    used_by: dict[str, list[Path]] = field(default_factory=dict)  # the shards files stitched
    parts: int = 0  # how many parts the inputs were stitched from
    # The execution of each module stitched (1 for its first call in each process), where the
    # parts said it.
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def used(self) -> list[Path]:
        """The parts' shards files the stitched arrays stand for."""
        return [p for paths in self.used_by.values() for p in paths]

    def without(self, labels: Collection[str]) -> Stitched:
        """These inputs less those of the modules ``labels`` (their shards then stay)."""
        return Stitched(
            {k: v for k, v in self.snapshots.items() if k not in labels},
            list(self.notes),
            {k: v for k, v in self.used_by.items() if k not in labels},
            self.parts,
            {k: v for k, v in self.calls.items() if k not in labels},
        )

    def of(self, label: str) -> str:
        """Which execution of module ``label`` its stitched inputs are, as a clause ("" where
        the parts did not say)."""
        call = self.calls.get(label)
        return f", of execution {call} of it on each" if call is not None else ""

    def data_text(self, before: str) -> str:
        """The bundle's ``data`` sentence once stitched (``before`` where nothing was)."""
        if not self.snapshots:
            return before
        calls = "; ".join(f"{label}: execution {c}" for label, c in sorted(self.calls.items()))
        which = f"; {calls} of the module on each part" if calls else ""
        return f"real inputs (stitched from the shards of {self.parts} parts: {WHAT}{which})"


WHAT = "each process's shards of the job's global arrays, saved by the capture hook"


def stitch(parts: Sequence[Part], failing: Part, count: int, folder: Path) -> Stitched:
    """Stitch the inputs of each of ``failing``'s modules that holds shards, from every
    part's shards of the same module and the same execution of it, into ``folder``."""
    found = Stitched(parts=count)
    room = plan.MAX_TOTAL  # what the merged bundle's archive may hold, and its readers read
    for module in failing.manifest["modules"]:
        before = module["files"].get(Role.BEFORE_PROTO.value)
        if Role.SHARDS.value not in module["files"] or before is None:
            continue
        label = module["label"]
        held = _shards_files(parts, failing.bundle.root / before)
        missing = [i for i in range(count) if i not in held]
        if missing:
            which = ", ".join(str(i) for i in missing)
            found.notes.append(
                f"the inputs of {label} are not stitched: no shards of it from part {which} "
                "(each part's bundle holds only its own process's shards)"
            )
            continue
        try:
            call, files, said = same_call(held, failing.index)
            order = [failing.index, *(i for i in sorted(files) if i != failing.index)]
            arrays, notes = assemble({i: files[i][1] for i in order}, room)
            data = arguments.snapshot_of(failing.bundle.root / before, arrays)
        except BugkitError as e:
            found.notes.append(f"the inputs of {label} are not stitched: {e}")
            continue
        name = f"{label}.snapshot.stitched.pb"
        target = folder / label / name
        target.parent.mkdir(parents=True, exist_ok=True)
        leftovers.write_whole(target, data)
        found.snapshots[label] = (members.module_member(label, name), target)
        found.used_by[label] = [path for path, _ in files.values()]
        room -= sum(a.nbytes for a in arrays)
        if call is not None:
            found.calls[label] = call
        found.notes += [f"{label}: {n}" for n in (*said, *notes)]
    return found


# A part's shards files of one module: the execution each holds -> (its file, its shards).
# Files of the format before the execution was said are under None (the newest only).
Held = dict[int | None, tuple[Path, shards.PartShards]]


def _shards_files(parts: Sequence[Part], before: Path) -> dict[int, Held]:
    """Each part's shards files of the module ``before`` (its proto before optimizations)
    describes (the file holds the module it was saved for), by the execution each holds."""
    want = _module_hash(hlo_proto.read_hlo_proto(before))
    found: dict[int, Held] = {}
    for part in parts:
        held: Held = {}
        newest_n = -1
        for path in part.bundle.files:
            name = path.relative_to(part.bundle.root).as_posix()
            n = _saved_n(name)
            if n is None:
                continue
            try:
                snapshot = hlo_proto.read_snapshot(path)
                if _module_hash(snapshot.hlo) != want:
                    continue
                saved = shards.of_snapshot(snapshot, path.name)
            except BugkitError:
                continue
            if saved.call is not None:
                held[saved.call] = (path, saved)
            elif n > newest_n:
                newest_n, held[None] = n, (path, saved)
        if held:
            found[part.index] = held
    return found


def same_call(
    held: dict[int, Held], failing: int
) -> tuple[int | None, dict[int, tuple[Path, shards.PartShards]], list[str]]:
    """The execution to stitch, each part's file of it, and what a reader must know: the
    failing part's newest execution where every part kept it; else the newest execution
    every part kept, said so. ``BugkitError`` where the parts kept none in common."""
    if any(None in h for h in held.values()):  # a part from before executions were said
        return (
            None,
            {i: h.get(None) or h[max(k for k in h if k is not None)] for i, h in held.items()},
            [],
        )
    newest = {i: max(k for k in h if k is not None) for i, h in held.items()}
    want = newest[failing]
    if all(n == want for n in newest.values()):
        return want, {i: h[want] for i, h in held.items()}, []
    differ = ", ".join(f"part {i}: {n}" for i, n in sorted(newest.items()))
    common: set[int | None] = set.intersection(*(set(h) for h in held.values()))
    if not common:
        raise BugkitError(
            f"the parts' newest executions of it differ ({differ}), and they kept none in common"
        )
    call = max(c for c in common if c is not None)
    said = (
        f"the parts' newest executions of it differ ({differ}); stitched from execution "
        f"{call}, the newest every part kept"
    )
    return call, {i: h[call] for i, h in held.items()}, [said]


def _saved_n(name: str) -> int | None:
    """The execution number of a part's shards file ``shards/<label>.snapshot.shards-<n>.pb``."""
    found = re.fullmatch(rf"{members.SHARDS}/[^/]+\.snapshot\.shards-(\d+)\.pb", name)
    return int(found.group(1)) if found else None


def _module_hash(hlo: Any) -> str:
    """The module's identity across processes: its computations, not its id or name."""
    module = hlo.hlo_module
    digest = hashlib.sha256(bytes(module.host_program_shape))
    for computation in module.computations:  # kept serialized (``hlo_proto``)
        digest.update(bytes(computation))
    return digest.hexdigest()


def assemble(
    saved: dict[int, shards.PartShards], room: int = plan.MAX_TOTAL
) -> tuple[list[np.ndarray[Any, Any]], list[str]]:
    """The global arrays, in parameter order, from each part's shards (part index -> its
    shards; the first part's values are taken where replicas differ), and a note for each
    parameter whose replicas differ. ``BugkitError`` where the parts disagree on the
    parameters, claim arrays their shards could not fill or more than ``room`` bytes of
    them, or their shards do not tile an array."""
    counts = {len(s.params) for s in saved.values()}
    if len(counts) != 1:
        raise BugkitError(f"the parts saved different numbers of parameters ({sorted(counts)})")
    claimed = [_claimed(i, saved) for i in range(counts.pop())]
    size = sum(math.prod(shape) * dtype.itemsize for shape, dtype in claimed)
    if size > room:
        raise BugkitError(
            f"the stitched arrays would take {size:,} bytes, past the {room:,} left of what "
            f"a bundle's archive may hold ({plan.MAX_TOTAL:,})"
        )
    arrays, notes = [], []
    for i, (shape, dtype) in enumerate(claimed):
        array, differ = _one(i, saved, shape, dtype)
        arrays.append(array)
        if differ:
            where = ", ".join(f"part {a} and part {b}" for a, b in differ)
            notes.append(
                f"parameter {i}: replicas of one shard differ between {where}; the values "
                f"of part {differ[0][0]} are used"
            )
    return arrays, notes


# An array's most dimensions: numpy 1's limit (2's is 64); no XLA program comes near it.
_MOST_DIMS = 32


def _claimed(i: int, saved: dict[int, shards.PartShards]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Parameter ``i``'s global shape and element type as the parts claim them, once the
    shards are known to lie inside that shape and to hold at least as many elements as it
    (replicas counted): a legitimate array is no larger than its shards."""
    dims = {s.params[i].dims for s in saved.values()}
    if len(dims) != 1:
        raise BugkitError(f"parameter {i}: the parts saw global shapes {sorted(dims)}")
    shape = dims.pop()
    if len(shape) > _MOST_DIMS:
        raise BugkitError(f"parameter {i}: a global shape of {len(shape):,} dimensions")
    if any(d < 0 for d in shape):
        raise BugkitError(f"parameter {i}: a global shape {shape} with a negative dimension")
    first = next((s.arrays[sh.array] for s in saved.values() for sh in s.params[i].shards), None)
    if first is None:
        raise BugkitError(f"parameter {i}: no part saved a shard of it")
    held = 0
    for part, part_shards in saved.items():
        for shard in part_shards.params[i].shards:
            inside = len(shard.bounds) == len(shape) and all(
                0 <= a <= b <= d for (a, b), d in zip(shard.bounds, shape, strict=True)
            )
            if not inside:
                raise BugkitError(
                    f"parameter {i}: part {part}'s shard at {_at(shard.bounds)} is not a "
                    f"place in its global shape {shape}"
                )
        # Each saved array once: several devices' entries may name one array.
        distinct = {shard.array for shard in part_shards.params[i].shards}
        held += sum(part_shards.arrays[k].size for k in distinct)
    if math.prod(shape) > held:
        raise BugkitError(
            f"parameter {i}: the parts claim a global shape {shape} of "
            f"{math.prod(shape):,} elements, and their shards hold {held:,}"
        )
    return shape, first.dtype


def _one(
    i: int, saved: dict[int, shards.PartShards], shape: tuple[int, ...], dtype: np.dtype[Any]
) -> tuple[np.ndarray[Any, Any], list[Any]]:
    """Parameter ``i`` whole (its shape and type as ``_claimed`` checked them), and the
    pairs of parts whose replicas of a place differ."""
    whole = np.zeros(shape, dtype=dtype)
    owner = np.full(shape, -1, dtype=np.int32)  # the part whose value each element holds
    differ: list[tuple[int, int]] = []
    for part, part_shards in saved.items():
        for shard in part_shards.params[i].shards:
            region = tuple(slice(a, b) for a, b in shard.bounds)
            value = part_shards.arrays[shard.array]
            if value.shape != whole[region].shape:
                raise BugkitError(
                    f"parameter {i}: part {part}'s shard at {_at(shard.bounds)} holds an "
                    f"array of shape {value.shape}"
                )
            if value.dtype != whole.dtype:
                raise BugkitError(f"parameter {i}: the parts saved {dtype} and {value.dtype}")
            held = owner[region]
            known = held >= 0
            if known.any():
                same = _equal(whole[region][known], value[known])
                other = int(held[known].flat[0])
                if not same and other != part and (other, part) not in differ:
                    differ.append((other, part))
                value = np.where(known, whole[region], value)
            whole[region] = value
            owner[region] = np.where(known, held, part)
    if (owner < 0).any():
        covered = int((owner >= 0).sum())
        raise BugkitError(
            f"parameter {i}: the shards cover {covered:,} of its {owner.size:,} elements"
        )
    return whole, differ


def _equal(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    """Equal as stored: bit for bit, so that a NaN equals itself."""
    return a.tobytes() == b.tobytes()


def _at(bounds: Sequence[tuple[int, int]]) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in bounds) + "]"
