"""Real inputs for the executions XLA writes no snapshot of.

XLA writes an ``HloSnapshot`` (module, arguments, result) for each single-device execution
and none for a multi-device one; the start-up hook saves those executions' arguments itself
(``args`` records: ``<pid>.args-<n>.npz``). TensorFlow writes none on CPU at all; the hook
saves the inputs of its ``jit_compile`` functions (``inputs`` records, naming the concrete
function, whose newest dumped module they are taken for). Before the dumps are indexed, each
saved set whose arrays fit its module's entry parameters becomes an ``HloSnapshot`` of the
before-optimizations module and those arguments, written beside XLA's files as
``module_NNNN.NAME.snapshot.recorded-<n>.pb`` (no result: the run read none back). From
then on selection, replay, the bundle, verify and repro.py treat it as any snapshot.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import frameworks
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import hlo_proto, protowire
from xla_bugkit.proc import leftovers
from xla_bugkit.run.evidence import ProcessEvidence

RECORDED = "recorded"  # the run-id part of the snapshots written here
_BEFORE = re.compile(r"^(?:\d+\.)?module_(\d+)\.(.+)\.before_optimizations\.hlo\.pb$")


def snapshot_name(label: str, n: int) -> str:
    """The file name of execution ``n``'s recorded snapshot of module ``label``."""
    return f"{label}.snapshot.{RECORDED}-{n}.pb"


def is_recorded(name: str) -> bool:
    """Whether a snapshot file name is one written here (not by XLA)."""
    return f".snapshot.{RECORDED}-" in name


def write_snapshots(dump_dir: Path, processes: Sequence[ProcessEvidence]) -> list[str]:
    """Write a snapshot for each execution whose arguments the hook saved; returns a note for
    each saved set that cannot serve as its module's inputs. Snapshots already written (a
    second bundle from a kept run) are kept as they are."""
    saved: list[Saved] = [
        (e.id, e.n, e.args)
        for p in processes
        for e in p.events
        if e.args is not None and e.id is not None
    ]
    inputs = [i for p in processes for i in p.inputs]
    if not saved and not inputs:
        return []
    protos = before_protos(dump_dir)
    saved += [(_function_module(protos, i.function), i.n, i.file) for i in inputs]
    return write_converted(dump_dir, protos, saved, snapshot_name, _snapshot, what="arguments")


# What the hook saved of one execution: its module's id (None: not known), its number, and
# the file it saved.
Saved = tuple[int | None, int, Path | None]


def write_converted(
    dump_dir: Path,
    protos: dict[int, tuple[Path, str]],
    saved: Iterable[Saved],
    name: Callable[[str, int], str],
    convert: Callable[[Path, Path], list[protowire.Buffer]],
    *,
    what: str,
) -> list[str]:
    """For each execution ``saved`` whose module is among ``protos`` (``before_protos``),
    the file ``convert(its proto before optimizations, the saved file)`` written beside
    XLA's as ``name(label, n)``; returns a note for each that cannot be (``what`` the hook
    saved: "arguments"). Files already there (a second bundle from a kept run) are kept."""
    notes = []
    for module_id, n, file in saved:
        found = protos.get(module_id) if module_id is not None else None
        if found is None or file is None:
            continue  # a module not dumped in this folder: nothing to replay it with
        path, label = found
        target = dump_dir / name(label, n)
        if target.exists() or not file.exists():  # gone: a newer call of it stands for it
            continue
        try:
            data = convert(path, file)
        except BugkitError as e:
            notes.append(f"the {what} saved for {label} are not used: {e}")
            continue
        leftovers.write_whole(target, data)
    return list(dict.fromkeys(notes))  # a module's first call and the one that raised: once


def recorded_snapshots(dump_dir: Path, process: ProcessEvidence) -> list[Path]:
    """The snapshots ``write_snapshots`` wrote in ``dump_dir`` for ``process``'s saved
    arguments, the newest execution first."""
    if not any(e.args is not None for e in process.events):
        return []
    protos = before_protos(dump_dir)
    saved = sorted(
        ((e.n, e.id) for e in process.events if e.args is not None and e.id is not None),
        reverse=True,
    )
    found = (
        dump_dir / snapshot_name(protos[module_id][1], n)
        for n, module_id in saved
        if module_id in protos
    )
    return [path for path in found if path.is_file()]


def before_protos(dump_dir: Path) -> dict[int, tuple[Path, str]]:
    """module id -> (its before_optimizations.hlo.pb, its ``module_NNNN.NAME`` label)."""
    try:
        names = os.listdir(dump_dir)
    except OSError:
        return {}
    found = {}
    for name in names:
        m = _BEFORE.match(name)
        if m:
            found[int(m.group(1))] = (dump_dir / name, f"module_{m.group(1)}.{m.group(2)}")
    return found


def _function_module(protos: dict[int, tuple[Path, str]], function: str) -> int | None:
    """The newest dumped module of TensorFlow's concrete ``function``."""
    ids = [
        i
        for i, (_, label) in protos.items()
        if frameworks.runs_function(label.split(".", 1)[1], function)
    ]
    return max(ids, default=None)


def _snapshot(before: Path, file: Path) -> list[protowire.Buffer]:
    """The snapshot's serialized parts (``hlo_proto.snapshot_parts``)."""
    return snapshot_of(before, _load(file))


def snapshot_of(before: Path, arrays: Sequence[np.ndarray[Any, Any]]) -> list[protowire.Buffer]:
    """The serialized parts of a snapshot of the module before optimizations ``before`` and
    ``arrays``, its inputs in parameter order (a Python scalar's or a float64 array's value
    cast as jax casts it on the way in); ``BugkitError`` where they do not fit."""
    from xla_bugkit.hlo import literal  # not at the top: see _literal

    hlo = hlo_proto.read_hlo_proto(before)
    shapes = hlo_proto.parameter_shapes(hlo)
    if len(arrays) == len(shapes):
        pairs = enumerate(zip(arrays, shapes, strict=True))
        literals = [_literal(i, array, shape) for i, (array, shape) in pairs]
    elif any(literal.format_shape(s) == "token[]" for s in shapes):
        raise BugkitError(
            "its parameters include a token (an ordered effect, such as "
            "io_callback(..., ordered=True)), which no saved array stands for"
        )
    else:
        literals = [[lit.SerializeToString()] for lit in _in_order(arrays, shapes)]
    return hlo_proto.snapshot_parts(hlo.SerializeToString(), literals)


def _in_order(arrays: Sequence[np.ndarray[Any, Any]], shapes: Sequence[Any]) -> list[Any]:
    """More inputs than parameters: TensorFlow turns an input whose value the module needs
    while compiling into a constant. Each parameter takes the next input of exactly its type
    and dimensions, in order; every parameter must find one."""
    from xla_bugkit.hlo import literal  # not at the top: see _literal

    literals, at = [], 0
    for i, shape in enumerate(shapes):
        want = literal.format_shape(shape)
        while at < len(arrays):
            lit = literal.numpy_to_literal(typed(arrays[at], shape))
            at += 1
            if literal.format_shape(lit.shape) == want:
                literals.append(lit)
                break
        else:
            raise BugkitError(
                f"{len(arrays)} arrays for {len(shapes)} parameters; none "
                f"left for parameter {i} ({want})"
            )
    return literals


def _literal(i: int, array: np.ndarray[Any, Any], shape: Any) -> list[protowire.Buffer]:
    """``array`` as the literal parameter ``i`` takes, serialized in parts
    (``literal.numpy_to_wire``). A Python scalar or a float64 numpy array reaches the hook
    as given, and jax casts it on the way in (``3.0`` to a weakly typed f32): a value of
    the same kind and dimensions is cast the same way."""
    # Imported here: literal pulls in ml_dtypes (~0.8 s), which a run that saved no
    # arguments (one device) never needs, and collect starts before the program does.
    from xla_bugkit.hlo import literal

    head, parts = literal.numpy_to_wire(typed(array, shape))
    want, got = literal.format_shape(shape), literal.format_shape(head.shape)
    if want == got:
        return parts
    wanted = literal.dtype_of(shape.element_type)
    if (
        wanted is not None
        and list(array.shape) == list(shape.dimensions)
        and wanted.kind == array.dtype.kind
    ):
        return literal.numpy_to_wire(array.astype(wanted))[1]
    raise BugkitError(f"argument {i} is {got}, the parameter {want}")


def typed(array: np.ndarray[Any, Any], shape: Any) -> np.ndarray[Any, Any]:
    """``array`` as the parameter's element type where np.savez kept only its bytes: an
    ml_dtypes array (bf16, float8, int4) is saved as raw voids ("|V2"), and loads so."""
    if array.dtype.kind != "V":
        return array
    from xla_bugkit.hlo import literal  # not at the top: see _literal

    wanted = literal.dtype_of(shape.element_type)
    return array.view(wanted) if wanted is not None and wanted.itemsize == array.itemsize else array


def _load(file: Path) -> list[np.ndarray[Any, Any]]:
    try:
        with np.load(file, allow_pickle=False) as npz:
            return [npz[f"arr_{i}"] for i in range(len(npz.files))]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise BugkitError(f"{file.name} cannot be read ({e})") from e
