"""The references of a module whose op-by-op reference runs on the CPU (a TPU's:
``platforms.Platform.cpu_reference``), in the replay child (``worker``).

The TPU's own ops are what is under test (an eager op is a module of one), and the CPU
computes float32 in float32. Where the module's float dots run at the default precision (one
bfloat16 pass), the module also runs on its own platform with them at HIGHEST: what tells that
precision from a wrong result.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import jaxlib_adapter
from xla_bugkit.hlo import precision
from xla_bugkit.replay.child import opbyop
from xla_bugkit.replay.protocol import HIGHEST, OPBYOP, arrays_path, error_path, save_arrays


def op_by_op(
    out: Path, conservative: Sequence[jaxlib_adapter.Override], text: str, args: list[Any]
) -> None:
    """Save the op-by-op reference, run on the CPU under the ``conservative`` overrides; one
    that fails leaves its ``opbyop.error`` in ``out``."""
    try:
        runner = opbyop.compile_and_run("cpu", conservative)
        save_arrays(arrays_path(out, OPBYOP), opbyop.run_op_by_op(text, args, runner))
    except Exception as e:  # the reference is best effort; the parent reports why
        error_path(out, OPBYOP).write_text(str(e))


def highest(out: Path, platform: str, text: str, args: list[Any]) -> None:
    """Where the module's dots run at the default precision, save the module run at HIGHEST
    on ``platform``; one that fails leaves its ``highest.error`` in ``out``."""
    if not precision.at_default(text):
        return
    try:
        highest = jaxlib_adapter.hlo_text_to_module_bytes(precision.at_highest(text))
        exe = jaxlib_adapter.compile(
            jaxlib_adapter.hlo_proto_to_stablehlo(highest), platform=platform
        )
        save_arrays(
            arrays_path(out, HIGHEST), jaxlib_adapter.execute(exe, [np.asarray(a) for a in args])
        )
    except Exception as e:
        error_path(out, HIGHEST).write_text(str(e))
