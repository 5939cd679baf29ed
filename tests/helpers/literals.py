"""Values worth a round trip through XLA's literals, for each element type."""

from __future__ import annotations

import numpy as np

from xla_bugkit.hlo.hlo_proto import PrimitiveType
from xla_bugkit.hlo.literal import all_dtypes

P = PrimitiveType

# Bits per element of the sub-byte types (each still takes a whole byte in memory).
SUB_BYTE_BITS = {P.S4: 4, P.U4: 4, P.S2: 2, P.U2: 2, P.S1: 1, P.U1: 1, P.F4E2M1FN: 4}


def sample(ptype: PrimitiveType) -> np.ndarray:
    """Values worth a round trip: every bit pattern of types up to 16 bits (NaNs included),
    extremes and specials of the wider ones."""
    dtype = all_dtypes()[ptype]
    if ptype == P.PRED:
        return np.array([True, False, False, True])
    if ptype in SUB_BYTE_BITS:
        return np.arange(2 ** SUB_BYTE_BITS[ptype], dtype=np.uint8).view(dtype)
    if dtype.itemsize <= 2:
        return np.arange(2 ** (8 * dtype.itemsize), dtype=f"u{dtype.itemsize}").view(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([info.min, -1 if info.min else 1, 0, 1, info.max], dtype=dtype)
    if dtype.kind == "c":
        return np.array([0, 1 + 2j, -0.0 - 3.5j, complex(np.inf, np.nan), 1e-30j], dtype=dtype)
    finfo = np.finfo(dtype)
    finite = [0.0, -0.0, 1.0, -1.5, float(finfo.smallest_subnormal), float(finfo.max)]
    return np.array([*finite, np.inf, -np.inf, np.nan], dtype=dtype)
