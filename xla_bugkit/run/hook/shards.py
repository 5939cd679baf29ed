"""This process's shards of a call over the devices of several processes (a
``jax.distributed`` job), each with its place in the global array.

No process holds such a call's inputs whole, and XLA writes no snapshot of it: each process
saves what it holds (``<pid>.shards-<n>.npz``: ``arr_0``, ``arr_1``, ... one per distinct
shard, and last the layout, an int64 array that says where each goes), and ``merge`` puts the
global arrays together from every part's (``xla_bugkit.run.shards`` reads the layout).

Every call of such a module comes here (``jax_calls.patch_fastpath`` keeps it off jax's C++
fast path), and is saved before it runs; of each module the process keeps its first call's
file and its two newest calls', the older of those deleted as a newer is written, so the
disk holds three calls' shards however many steps run. The layout says which execution of
the module (1 for its first) each file holds: merge stitches the same execution of every
part. Two newest, not one: a peer that the job takes down one step after the failing
process has started its next call, and the step that failed is its one before.

The layout, one flat int64 array: ``FORMAT``, the execution, the parameter count, then per
parameter its
element type (numpy's dtype number is not stable across versions, so the kind letter's code
and the item size), its rank and global dimensions, the sharding's device ids in order
(count first), and its shards (count first), each the ``arr_K`` it is, the device id, the
process index, and (start, stop) per dimension. A shard held alike by several of this
process's devices is saved once, with one entry per device.

Loaded by file path from ``jax_calls`` (as the recorder's siblings are), inside the
program's process: standard library, numpy and the program's own jax only.
"""

from __future__ import annotations

from typing import Any

FORMAT = 2

# Each module's files kept (its key -> the first call's file, then the two newest calls').
_KEPT: dict[Any, list[str]] = {}


def save(recorder: Any, n: int, params: list[Any], module: Any, call: int) -> None:
    """Save this process's shards of ``params`` (the call's parameters, in order) for
    execution ``n``, the ``call``-th of ``module`` in this process, within the recorder's
    budget (``Recorder.save_arrays``); of the module's files before it, the first and the
    newest stay."""
    import numpy as np

    # Each place once (its replicas are most often alike): over the budget, nothing is
    # copied from the devices, on every call.
    least = sum(_place_bytes(a) for a in params)
    if least > recorder.budget():
        recorder.write("args_skipped", n=n, bytes=least)
        return
    arrays: list[Any] = []
    layout = [FORMAT, call, len(params)]
    for a in params:
        shape = tuple(int(d) for d in a.shape)
        dtype = np.dtype(a.dtype)
        layout += [ord(dtype.kind), dtype.itemsize, len(shape), *shape]
        order = _device_order(a)
        layout += [len(order), *order]
        entries: list[list[int]] = []
        seen: dict[tuple[tuple[int, int], ...], list[int]] = {}  # index -> arr_K of it
        for shard in a.addressable_shards:
            where = _bounds(shard.index, shape)
            data = np.asarray(shard.data)
            k = next((k for k in seen.get(where, ()) if np.array_equal(arrays[k], data)), None)
            if k is None:
                k = len(arrays)
                arrays.append(data)
                seen.setdefault(where, []).append(k)
            device = shard.device
            entries.append(
                [k, int(device.id), int(device.process_index), *(x for b in where for x in b)]
            )
        layout += [len(entries), *(x for e in entries for x in e)]
    arrays.append(np.asarray(layout, dtype=np.int64))
    name = recorder.save_arrays(n, arrays, record="shards", stem="shards", call=call)
    if name is None:
        return
    kept = _KEPT.setdefault(module, [])
    if len(kept) == 3:
        recorder.drop(kept.pop(1))
    kept.append(name)


def _place_bytes(a: Any) -> int:
    """The bytes of this process's shards of ``a``, each place in the global array once."""
    import numpy as np

    places = {tuple(_bounds(s.index, tuple(a.shape))) for s in a.addressable_shards}
    size = np.dtype(a.dtype).itemsize
    return sum(size * int(np.prod([stop - start for start, stop in p])) for p in places)


def _device_order(a: Any) -> list[int]:
    """The sharding's devices in its own order (the order the compiled module's partitions
    take them), where jax says it; else by id."""
    sharding = a.sharding
    order = getattr(sharding, "_device_assignment", None)
    if order is None:
        order = sorted(sharding.device_set, key=lambda d: d.id)
    return [int(d.id) for d in order]


def _bounds(index: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """A shard's index (a slice per dimension) as (start, stop) per dimension."""
    out = []
    for i, size in enumerate(shape):
        s = index[i] if i < len(index) else slice(None)
        start, stop, _ = s.indices(size)
        out.append((start, stop))
    return tuple(out)
