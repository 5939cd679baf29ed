"""Real inputs for the executions XLA writes no snapshot of.

XLA writes an ``HloSnapshot`` (module, arguments, result) for each single-device execution
and none for a multi-device one; the start-up hook saves those executions' arguments itself
(``args`` records: ``<pid>.args-<n>.npz``). Before the dumps are indexed, each saved set
whose arrays fit its module's entry parameters becomes an ``HloSnapshot`` of the
before-optimizations module and those arguments, written beside XLA's files as
``module_NNNN.NAME.snapshot.recorded-<n>.pb`` (no result: the run read none back). From
then on selection, replay, the bundle, verify and repro.py treat it as any snapshot.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit.capture.evidence import Event, ProcessEvidence
from xla_bugkit.errors import BugkitError
from xla_bugkit.replay import hlo_proto, literal

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
    saved = [e for p in processes for e in p.events if e.args is not None and e.id is not None]
    if not saved:
        return []
    protos = _before_protos(dump_dir)
    notes = []
    for event in saved:
        found = protos.get(event.id) if event.id is not None else None
        if found is None:
            continue  # a module not dumped in this folder: nothing to replay it with
        path, label = found
        target = dump_dir / snapshot_name(label, event.n)
        if target.exists():
            continue
        try:
            data = _snapshot(path, event)
        except BugkitError as e:
            notes.append(f"the arguments saved for {label} are not used: {e}")
            continue
        partial = target.with_name(f".{target.name}.partial")
        partial.write_bytes(data)
        os.replace(partial, target)
    return notes


def _before_protos(dump_dir: Path) -> dict[int, tuple[Path, str]]:
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


def _snapshot(before: Path, event: Event) -> bytes:
    hlo = hlo_proto.read_hlo_proto(before)
    arrays = _load(event)
    shapes = hlo_proto.parameter_shapes(hlo)
    if len(arrays) != len(shapes):
        raise BugkitError(f"{len(arrays)} arrays for {len(shapes)} parameters")
    pairs = enumerate(zip(arrays, shapes, strict=True))
    literals = [_literal(i, array, shape) for i, (array, shape) in pairs]
    return hlo_proto.make_snapshot(hlo.SerializeToString(), literals)


def _literal(i: int, array: np.ndarray[Any, Any], shape: Any) -> Any:
    """``array`` as the literal parameter ``i`` takes. A Python scalar or a float64 numpy
    array reaches the hook as given, and jax casts it on the way in (``3.0`` to a weakly
    typed f32): a value of the same kind and dimensions is cast the same way."""
    lit = literal.numpy_to_literal(array)
    want, got = literal.format_shape(shape), literal.format_shape(lit.shape)
    if want == got:
        return lit
    wanted = literal.DTYPES.get(shape.element_type)
    if (wanted is not None and list(array.shape) == list(shape.dimensions)
            and wanted.kind == array.dtype.kind):  # fmt: skip
        return literal.numpy_to_literal(array.astype(wanted))
    raise BugkitError(f"argument {i} is {got}, the parameter {want}")


def _load(event: Event) -> list[np.ndarray[Any, Any]]:
    assert event.args is not None
    try:
        with np.load(event.args, allow_pickle=False) as npz:
            return [npz[f"arr_{i}"] for i in range(len(npz.files))]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise BugkitError(f"{event.args.name} cannot be read ({e})") from e
