"""A TPU module's difference from its op-by-op reference that is the TPU's default matmul
precision, not a wrong result: its float32 dots run as one bfloat16 pass unless asked for
more. The replay child runs such a module again with every float dot at HIGHEST
(``protocol.HIGHEST``); ``judge`` asks here what that run, or the inputs, say."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xla_bugkit.replay import protocol
from xla_bugkit.replay.compare import Comparison, compare_outputs

AGREES_AT_HIGHEST = "with every dot at precision HIGHEST the result agrees with it"


def evidence(
    out: Path, reference: list[np.ndarray], differs: Comparison, out_of_range: str | None
) -> str | None:
    """When the difference from the ``reference`` is the TPU's default matmul precision:
    the module run with its float dots at HIGHEST (its arrays in ``out``, the child's
    folder) agrees with it, or its inputs are out of the range where that precision can be
    judged (``out_of_range`` says why). The evidence that says so; None when it is
    neither."""
    highest_path = protocol.arrays_path(out, protocol.HIGHEST)
    highest = protocol.load_arrays(highest_path) if highest_path.exists() else None
    if highest is not None and compare_outputs(highest, reference).close:
        return (
            f"ran to completion; differs from the op-by-op reference only at the TPU's default "
            f"matmul precision (float32 dots in one bfloat16 pass: {differs.summary()}); "
            + AGREES_AT_HIGHEST
        )
    # The child runs the module at HIGHEST only where it is a TPU module with float dots at
    # the default precision: what it left (arrays, or why there are none) says it is one.
    at_default = highest is not None or protocol.error_path(out, protocol.HIGHEST).exists()
    if not at_default or out_of_range is None:
        return None
    return (
        f"ran to completion; differs from the op-by-op reference ({differs.summary()}) on "
        f"inputs {out_of_range}: the TPU's float32 dots at the default precision round their "
        "operands to one bfloat16 pass, so such inputs prove nothing of this module's dots"
    )
