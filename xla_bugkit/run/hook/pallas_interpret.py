"""Pallas's TPU interpret mode forced on a whole program, and the outputs of one of its calls
recorded: the reference for a Pallas kernel that returns wrong values compiled.

Only the run collect starts for that reference sets ``XLA_BUGKIT_PALLAS_INTERPRET``, to the
module whose first call's outputs are kept (``jit_head``); every other run pays nothing,
and this module is not even loaded. The interpret mode simulates each kernel in the
program's own Python (host callbacks), so a replay without the program cannot compute it:
the program's outputs under it, recorded here, are the reference.

Loaded by file path from ``jax_patches`` (as the recorder's siblings are), inside the
program's interpreter: standard library and the program's own jax only.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "XLA_BUGKIT_PALLAS_INTERPRET"
# Its parameters' MLIR types as the ``compile`` record gives them ("tensor<2x256xf32>"), where
# collect knows them: a function compiled for several shapes keeps the call of the one chosen.
ENV_SHAPES = "XLA_BUGKIT_PALLAS_SHAPES"


def wanted() -> str:
    """The module whose first call's outputs are kept; empty when the run does not ask."""
    return os.environ.get(ENV, "")


def force(recorder: Any) -> None:
    """Every ``pallas_call`` traced from now on, in any thread, runs in TPU interpret mode
    (``pltpu.force_tpu_interpret_mode``, entered for the whole process): a ``pallas_interpret``
    record says it is on, or, with ``error``, why it could not be."""
    try:
        from jax.experimental.pallas import tpu as pltpu

        params = pltpu.InterpretParams()
        try:
            # The public context manager sets a thread-local value: the same value set as
            # the default reaches the program's other threads too.
            from jax._src import config

            config.pallas_tpu_interpret_mode_context_manager.set_global(params)
        except Exception:  # a jax that keeps it elsewhere: this thread, which runs main
            pltpu.force_tpu_interpret_mode(params).__enter__()
    except Exception as e:  # no Pallas in this jax, or no interpret mode in it
        first = str(e).strip().splitlines()
        recorder.write("pallas_interpret", error=f"{type(e).__name__}: {first[0] if first else ''}")
        return
    recorder.write("pallas_interpret", module=wanted())


def _types(shapes: str) -> list[str]:
    """Parameter types as compared across the two runs: the interpret mode's kernels are
    host callbacks, whose ordering gives the module a token parameter the compiled one lacks."""
    return [t for t in shapes.split(", ") if t and t != "!stablehlo.token"]


_KEPT: set[str] = set()  # the modules whose outputs were kept: their first call only


def keep_outputs(recorder: Any, n: int, module: str, shapes: str, arrays: list[Any]) -> None:
    """Save the outputs of execution ``n`` when it is the first call of the wanted module,
    compiled for the wanted ``shapes`` where they are given: an ``outputs`` record, and
    ``<pid>.outputs-<n>.npz`` (``arr_0``, ... and last the array of their dtypes' names).
    Reading them waits for the device."""
    if module != wanted() or module in _KEPT:
        return
    if os.environ.get(ENV_SHAPES) and _types(shapes) != _types(os.environ[ENV_SHAPES]):
        return
    _KEPT.add(module)
    try:
        import numpy as np

        values = [np.asarray(a) for a in arrays]
        # Laid out as the replay's arrays are (``replay.protocol.save_arrays``, which cannot
        # be imported here): bfloat16 and its kind as raw bits, their names saved last.
        raw = [v if v.dtype.kind != "V" else v.view(f"u{v.dtype.itemsize}") for v in values]
        names = np.array([v.dtype.name for v in values], dtype=str)
        recorder.save_arrays(n, [*raw, names], record="outputs", stem="outputs")
    except Exception as e:  # an output that cannot be read: the kernel's error, for collect
        first = str(e).strip().splitlines()
        error = f"{type(e).__name__}: {first[0][:300] if first else ''}"
        recorder.write("hook_error", error=f"outputs of {n}: {error}")
