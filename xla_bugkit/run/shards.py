"""One process's shards of a call over the devices of several processes (a ``jax.distributed``
job), as its part bundle keeps them, and read back for ``merge`` to stitch.

The start-up hook saves them (``hook.shards``: ``<pid>.shards-<n>.npz``, the distinct shards
and a layout). Beside XLA's files they become
``module_NNNN.NAME.snapshot.shards-<n>.pb``: an ``HloSnapshot`` of the module before
optimizations whose arguments are the shards, in the order saved, and last the layout, an
s64 literal. A snapshot's literals are the user's data to the bundle's privacy rules (kept
with the inputs, left out by ``--no-data``, never read as text), and so are these; a
replay never takes the file for the module's inputs (its role is ``shards``, not
``snapshot``).

A part holds the shards of its first call of each such module and of its newest; the layout
says which execution of the module each is (``PartShards.call``), so that merge stitches the
same execution from every part.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import hlo_proto, protowire
from xla_bugkit.run import arguments
from xla_bugkit.run.evidence import ProcessEvidence

FORMAT = 2  # the layout's first number (``hook.shards.FORMAT``)
UNNUMBERED = 1  # the format before it, without the execution


def file_name(label: str, n: int) -> str:
    """The name of execution ``n``'s shards of module ``label``."""
    return f"{label}.snapshot.shards-{n}.pb"


@dataclass(frozen=True)
class Shard:
    """One device's shard: the saved array it is, and where it goes."""

    array: int  # its place among the saved arrays
    device: int
    process: int
    bounds: tuple[tuple[int, int], ...]  # (start, stop) per dimension of the global array


@dataclass(frozen=True)
class Param:
    """One parameter of the call: its global array and this process's shards of it."""

    dims: tuple[int, ...]
    devices: tuple[int, ...]  # the sharding's devices, in its order
    shards: tuple[Shard, ...]


@dataclass(frozen=True)
class PartShards:
    """What one process saved of one call: ``call``, which execution of its module in that
    process it was (1 for the first; None in a file of the format before it said so)."""

    params: tuple[Param, ...]
    arrays: tuple[np.ndarray[Any, Any], ...]
    call: int | None = None


def write_files(dump_dir: Path, processes: Sequence[ProcessEvidence]) -> list[str]:
    """Write the shards file of each execution whose shards the hook saved, for a module
    dumped in ``dump_dir``; returns a note for each that cannot be (files already there
    are kept)."""
    saved = [(e.id, e.n, e.shards) for p in processes for e in p.events if e.shards is not None]
    if not saved:
        return []
    protos = arguments.before_protos(dump_dir)
    return arguments.write_converted(dump_dir, protos, saved, file_name, _snapshot, what="shards")


def _snapshot(before: Path, file: Path) -> list[protowire.Buffer]:
    from xla_bugkit.hlo import literal  # ml_dtypes: only when there are shards

    hlo = hlo_proto.read_hlo_proto(before)
    shapes = hlo_proto.parameter_shapes(hlo)
    saved = _load(file)
    *arrays, layout = saved
    params, _ = parse_layout(layout, len(arrays))
    if len(params) != len(shapes):
        raise BugkitError(f"{len(params)} arrays for the module's {len(shapes)} parameters")
    typed = list(arrays)
    for param, shape in zip(params, shapes, strict=True):
        for shard in param.shards:
            typed[shard.array] = arguments.typed(arrays[shard.array], shape)
    literals = [literal.numpy_to_wire(a)[1] for a in [*typed, layout]]
    return hlo_proto.snapshot_parts(hlo.SerializeToString(), literals)


def read(path: Path) -> PartShards:
    """A shards file (``file_name``) read back."""
    return of_snapshot(hlo_proto.read_snapshot(path), path.name)


def of_snapshot(snapshot: Any, name: str) -> PartShards:
    """The shards an ``HloSnapshot`` read from the file ``name`` holds."""
    from xla_bugkit.hlo import literal

    values = [literal.literal_to_numpy(a) for a in snapshot.arguments]
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    if not arrays or len(arrays) != len(values):
        raise BugkitError(f"{name}: not a file of shards (no layout)")
    layout = arrays.pop()
    params, call = parse_layout(layout, len(arrays))
    return PartShards(params, tuple(arrays), call)


def parse_layout(layout: np.ndarray[Any, Any], count: int) -> tuple[tuple[Param, ...], int | None]:
    """The layout the hook wrote (``hook.shards``), checked against ``count`` arrays, and
    the execution it says it is (None in the format before it said so)."""
    numbers = _Numbers(layout)
    form = numbers.next()
    if form not in (FORMAT, UNNUMBERED):
        raise BugkitError("its shards are laid out in a format this version does not read")
    call = numbers.next() if form == FORMAT else None
    params = []
    for _ in range(numbers.next()):
        numbers.next(), numbers.next()  # the element type, which the module's says again
        dims = tuple(numbers.take(numbers.next()))
        devices = tuple(numbers.take(numbers.next()))
        shards = []
        for _ in range(numbers.next()):
            array, device, process = numbers.take(3)
            flat = numbers.take(2 * len(dims))
            bounds = tuple(zip(flat[::2], flat[1::2], strict=True))
            if not 0 <= array < count:
                raise BugkitError(f"a shard names array {array} of {count}")
            shards.append(Shard(array, device, process, bounds))
        params.append(Param(dims, devices, tuple(shards)))
    return tuple(params), call


class _Numbers:
    """The layout's numbers, read in order; running out is a damaged file."""

    def __init__(self, layout: np.ndarray[Any, Any]) -> None:
        self._it: Iterator[int] = iter(int(x) for x in np.asarray(layout).reshape(-1))

    def next(self) -> int:
        try:
            return next(self._it)
        except StopIteration:
            raise BugkitError("its shards' layout ends early") from None

    def take(self, k: int) -> list[int]:
        if k < 0:
            raise BugkitError("its shards' layout is damaged")
        return [self.next() for _ in range(k)]


def _load(file: Path) -> list[np.ndarray[Any, Any]]:
    try:
        with np.load(file, allow_pickle=False) as npz:
            return [npz[f"arr_{i}"] for i in range(len(npz.files))]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise BugkitError(f"{file.name} cannot be read ({e})") from e
