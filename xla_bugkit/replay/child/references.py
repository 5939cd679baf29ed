"""The replay child's references (``worker``), run after the test under conservative flags:
the module compiled whole (``conservative.npz``) and run op by op (``opbyop.npz``); a
reference that fails leaves ``<name>.error``. A module partitioned by hand (shard_map) has only
the first, a kernel only its platform's compiler lowers has neither, and a TPU module's are
``tpu_reference``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import jaxlib_adapter, platforms
from xla_bugkit.replay.child import compiled, opbyop, replayable, tpu_reference
from xla_bugkit.replay.child.early import Early
from xla_bugkit.replay.protocol import (
    CONSERVATIVE,
    KERNEL_ONLY,
    OPBYOP,
    arrays_path,
    error_path,
    save_arrays,
)


def _partitioned_conservative(
    spec: dict[str, Any], module_bytes: bytes, args: list[Any], layout: tuple[int, int]
) -> None:
    """The conservative reference of a module that runs only partitioned (shard_map): the
    same partitioned module, compiled with the conservative flags after the recorded ones."""
    recorded = compiled.overrides(spec["flags"])

    def run(chosen: Sequence[jaxlib_adapter.Override]) -> list[np.ndarray]:
        exe = compiled.compile_as_run(spec, module_bytes, layout, [*recorded, *chosen])
        return compiled.execute(exe, module_bytes, args, layout)

    _conservative_run(Path(spec["out"]), compiled.overrides(spec["conservative"]), run)


def _conservative(
    spec: dict[str, Any], module_bytes: bytes, args: list[Any], early: Early | None
) -> list[jaxlib_adapter.Override]:
    """Run the whole module under the conservative flags (compiled ``early``, where it was);
    returns the overrides this jaxlib knows (an older one lacks some), for the op-by-op
    reference to use too."""
    mlir = jaxlib_adapter.hlo_proto_to_stablehlo(module_bytes)

    def run(chosen: Sequence[jaxlib_adapter.Override]) -> list[np.ndarray]:
        exe = early.take(chosen) if early is not None else None
        if exe is None:
            exe = jaxlib_adapter.compile(mlir, platform=spec["platform"], overrides=chosen)
        return jaxlib_adapter.execute(exe, [np.asarray(a) for a in args])

    return _conservative_run(Path(spec["out"]), compiled.overrides(spec["conservative"]), run)


def _conservative_run(
    out: Path,
    chosen: list[jaxlib_adapter.Override],
    run: Callable[[Sequence[jaxlib_adapter.Override]], list[np.ndarray]],
) -> list[jaxlib_adapter.Override]:
    """Save ``run(chosen)`` (the module compiled under the conservative overrides, and run)
    as the conservative reference, or why it has none; an override this jaxlib rejects is
    left out and the run tried again. Returns the overrides kept."""
    while True:
        try:
            arrays = run(chosen)
        except Exception as e:  # the reference is best effort; the parent reports why
            name = compiled.rejected_option(e)
            if name is not None and any(n == name for n, _ in chosen):
                chosen = [(n, v) for n, v in chosen if n != name]
                continue
            error_path(out, CONSERVATIVE).write_text(str(e))
            return chosen
        save_arrays(arrays_path(out, CONSERVATIVE), arrays)
        return chosen


def run_reference(
    spec: dict[str, Any],
    module_bytes: bytes,
    text: str,
    args: list[Any],
    layout: tuple[int, int] = (1, 1),
    early: Early | None = None,
) -> None:
    """Save the references of ``spec``'s module (``text``, run on ``args``) in its ``out``
    folder, or why it has none; ``early``: those started beside the test."""
    out = Path(spec["out"])
    manual = replayable.manual_targets(text)
    if manual:
        # Op by op runs the unpartitioned module on one device; a per-shard body has no
        # meaning there, and the markers around it have no one-device implementation. The
        # conservative reference compiles it partitioned, as the test does.
        reason = (
            f"the module has a Shardy manual computation (custom-call {manual[0]}, from "
            "shard_map or pmap), which runs only partitioned"
        )
        error_path(out, OPBYOP).write_text(reason)
        _partitioned_conservative(spec, module_bytes, args, layout)
        return
    if not replayable.plain_references(spec["platform"], text):
        # A kernel only its platform's compiler lowers (a Pallas kernel on a TPU) runs
        # nowhere else: neither reference can.
        for stem in (OPBYOP, CONSERVATIVE):
            error_path(out, stem).write_text(KERNEL_ONLY)
        return
    chosen = _conservative(spec, module_bytes, args, early)
    found = platforms.find(spec["platform"])
    if found is not None and found.cpu_reference:
        if early is None:
            tpu_reference.op_by_op(out, compiled.overrides(spec["conservative"]), text, args)
        else:
            early.settle()
        tpu_reference.highest(out, spec["platform"], text, args)
        return
    try:
        runner = opbyop.compile_and_run(spec["platform"], chosen)
        save_arrays(arrays_path(out, OPBYOP), opbyop.run_op_by_op(text, args, runner))
    except Exception as e:
        error_path(out, OPBYOP).write_text(str(e))
