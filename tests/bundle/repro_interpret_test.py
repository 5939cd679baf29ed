"""repro.py's reference for a Pallas kernel judged by its interpret mode: expected.npz holds
the outputs collect recorded under that mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xla_bugkit.bundle import members, repro
from xla_bugkit.replay import protocol
from xla_bugkit.verdict import COMPILED_DIFFERS, INTERPRET_MODE, Outcome, Verdict


def test_a_kernel_judged_by_its_interpret_mode_bundles_those_outputs_as_expected(
    tmp_path: Path,
) -> None:
    """expected.npz is the interpret mode's outputs the verdict was judged by (no replay can
    compute them again), and the wrong values are read against them."""
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    right = np.arange(4.0, dtype=np.float32)
    protocol.save_arrays(protocol.arrays_path(arrays, protocol.TEST), [np.zeros(4, np.float32)])
    protocol.save_arrays(protocol.arrays_path(arrays, protocol.INTERPRETED), [right])
    verdict = Verdict(
        "module_0000.jit_head", Outcome.REPRODUCED_WRONG, f"{COMPILED_DIFFERS}: 3/4 differ",
        "snapshot", numbers={"reference": INTERPRET_MODE},
    )  # fmt: skip
    target = repro.Target("module_0000.jit_head", {}, "tpu", verdict, arrays)
    stage = tmp_path / "stage"
    stage.mkdir()
    assert repro._write_expected(stage, target, "snapshot", []) == INTERPRET_MODE
    (expected,) = protocol.load_arrays(stage / members.EXPECTED)
    assert np.array_equal(expected, right)
    rows = repro._wrong_values(target, INTERPRET_MODE)
    assert rows[0] == ("[1]", "1.0", "0.0")
