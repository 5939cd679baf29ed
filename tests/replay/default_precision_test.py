"""A TPU module's difference from its op-by-op reference that is the TPU's default matmul
precision, from real arrays as the replay child leaves them: its run at HIGHEST agrees with
the reference, or its inputs are out of the range where that precision can be judged."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

from xla_bugkit.replay import default_precision, protocol
from xla_bugkit.replay.compare import compare_outputs

REFERENCE = [np.linspace(-1.0, 1.0, 256, dtype=np.float32).reshape(2, 128)]
# The same values through one bfloat16 pass, as the TPU's float32 dot gives them by default.
ROUNDED = [REFERENCE[0].astype(ml_dtypes.bfloat16).astype(np.float32) + np.float32(1e-2)]
OUT_OF_RANGE = "beyond bfloat16's range (the extreme set 'huge')"


def _out(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    return out


def test_a_run_at_highest_that_agrees_says_it_is_the_default_precision(tmp_path: Path) -> None:
    out = _out(tmp_path)
    protocol.save_arrays(protocol.arrays_path(out, protocol.HIGHEST), REFERENCE)
    differs = compare_outputs(ROUNDED, REFERENCE)
    assert not differs.close
    said = default_precision.evidence(out, REFERENCE, differs, None)
    assert said is not None
    assert said.startswith("ran to completion; differs from the op-by-op reference only at")
    assert said.endswith(default_precision.AGREES_AT_HIGHEST)


def test_a_run_at_highest_that_differs_too_is_no_excuse(tmp_path: Path) -> None:
    out = _out(tmp_path)
    protocol.save_arrays(protocol.arrays_path(out, protocol.HIGHEST), ROUNDED)
    differs = compare_outputs(ROUNDED, REFERENCE)
    assert default_precision.evidence(out, REFERENCE, differs, None) is None
    # Unless its inputs are where that precision cannot be judged.
    said = default_precision.evidence(out, REFERENCE, differs, OUT_OF_RANGE)
    assert said is not None and f"on inputs {OUT_OF_RANGE}" in said


def test_a_module_not_run_at_highest_is_no_tpu_dot_at_the_default(tmp_path: Path) -> None:
    out = _out(tmp_path)
    differs = compare_outputs(ROUNDED, REFERENCE)
    assert default_precision.evidence(out, REFERENCE, differs, OUT_OF_RANGE) is None
    # Why the child could not run it at HIGHEST still says it is one.
    protocol.error_path(out, protocol.HIGHEST).write_text("MemoryError")
    assert default_precision.evidence(out, REFERENCE, differs, OUT_OF_RANGE) is not None
