"""A Pallas kernel judged by its outputs under Pallas's TPU interpret mode.

Nothing outside a ``tpu_custom_call`` can check it: the op-by-op and conservative references
would run the kernel again (``protocol.KERNEL_ONLY``). Where collect ran the program under
the interpret mode (``inputs.Interpreted``), the kernel's outputs there are its reference on
the recorded inputs, and the program's own check under that mode says whether the kernel's
code gives the wrong values by itself. ``judge`` asks here; these are the pieces it adds.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from xla_bugkit.replay import protocol
from xla_bugkit.replay.inputs import ReplayInput
from xla_bugkit.verdict import CANNOT_INTERPRET, INTERPRET_MODE, OWN_CODE, Verdict


def unchecked(inp: ReplayInput) -> str:
    """The evidence of a kernel that nothing checked, and why its interpret mode did not."""
    evidence = f"ran to completion on the TPU; no reference: {protocol.KERNEL_ONLY}"
    if inp.interpreted is not None and inp.interpreted.error:
        evidence += f"; {CANNOT_INTERPRET}: {inp.interpreted.error}"
    return evidence


def outputs(inp: ReplayInput, inputs: str) -> Path | None:
    """A Pallas kernel's outputs under the interpret mode, where collect recorded them and
    the replay ran on the same inputs (``inputs``: what the replay ran on): the recorded
    ones, never generated or extreme values."""
    interpreted = inp.interpreted
    if interpreted is None or interpreted.outputs is None or inputs != "snapshot":
        return None
    return interpreted.outputs


def with_outputs(
    kept: Path | None, found: dict[str, list[np.ndarray]], missing: list[str]
) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """The references with a Pallas kernel's own (``kept``: its outputs under the interpret
    mode, ``outputs``): they stand in for the references the kernel keeps from being
    computed (``protocol.KERNEL_ONLY``)."""
    if kept is None:
        return found, missing
    found = {**found, INTERPRET_MODE: protocol.load_arrays(kept)}
    return found, [m for m in missing if protocol.KERNEL_ONLY not in m]


def with_check(inp: ReplayInput, verdict: Verdict) -> Verdict:
    """``verdict``, where it was judged by the interpret mode's outputs, with what the
    program's own check said under that mode (``interpret_check``: "passed" or "failed"),
    which the bundle keeps beside them."""
    interpreted = inp.interpreted
    judged_by = str(verdict.numbers.get("reference", ""))
    if interpreted is None or interpreted.passed is None or INTERPRET_MODE not in judged_by:
        return verdict
    said = "passed" if interpreted.passed else "failed"
    return replace(verdict, numbers={**verdict.numbers, "interpret_check": said})


def own_code(inp: ReplayInput, agreeing: list[str], suspected: bool) -> dict[str, object]:
    """The ``kernel`` number where the kernel's own code gives the wrong values: the replay
    agrees with the interpret mode, and the program's check failed under that mode too."""
    interpreted = inp.interpreted
    if interpreted is None or interpreted.passed is not False or not suspected:
        return {}
    return {"kernel": OWN_CODE} if INTERPRET_MODE in agreeing else {}
