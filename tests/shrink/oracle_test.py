"""The wrong-result oracle's mismatch classes."""

from __future__ import annotations

import numpy as np

from xla_bugkit.shrink.oracle import mismatch_class


def test_classes() -> None:
    ref = [np.array([88.0, np.inf, np.inf], np.float32)]
    assert mismatch_class([np.array([88.0, 89.0, 100.0], np.float32)], ref) == "inf"
    assert mismatch_class([np.array([88.0, np.nan, np.inf], np.float32)], ref) == "nan"
    assert mismatch_class([np.array([1.0, np.inf, np.inf], np.float32)], ref) == "values"
    assert mismatch_class(ref, ref) is None
