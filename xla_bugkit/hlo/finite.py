"""Whether an XLA snapshot's result holds a NaN or an infinity, read from the wire without
its proto classes (a training step's snapshot is its whole state).

A NaN that appears in a loop is fed back into every later step: the newest snapshot's
inputs already hold it, and replaying them shows only that NaN stays NaN. The execution
whose result first held one, after results that held none, is the one to replay. (Its
inputs may hold NaN by design: targets masked as missing.)
"""

from __future__ import annotations

import mmap
from pathlib import Path

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import protowire

_RESULT = 3  # HloSnapshot.result
_TUPLE = 10  # LiteralProto.tuple_literals
# LiteralProto's float fields: numpy's little-endian type of their values (complex: pairs).
_FLOATS = {8: "<f4", 9: "<f8", 12: "<f4", 18: "<f8"}  # f32s, f64s, c64s, c128s
# 16-bit floats stored as bytes: the mask of their exponent bits, all set for NaN and inf.
_HALVES = {11: 0x7C00, 13: 0x7F80}  # f16s, bf16s
_DEEPEST = 64  # tuples nested deeper are no snapshot XLA wrote (a stranger's file may be one)


def result_finite(path: Path) -> bool | None:
    """Whether the result the snapshot at ``path`` recorded holds only finite values; None
    when it cannot be read as a snapshot with a result (being written, not one, or an
    execution that never ended)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            view = memoryview(data)
            try:
                spans = protowire.spans(view)
                at, end = next(
                    ((a, e) for n, k, _, a, e in spans if n == _RESULT and k == protowire.LENGTH),
                    (0, -1),
                )
                return None if end < 0 else _finite(view[at:end])
            except BugkitError:  # not protobuf, or nested without end
                return None  # handled here, its traceback's slices of the view are gone
            finally:
                view.release()
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return None


def _finite(literal: memoryview, depth: int = 0) -> bool:
    """Whether a ``LiteralProto`` (a tuple's elements included) holds only finite values."""
    import numpy as np  # not before a run starts: collect's snapshot pruner imports this module

    if depth > _DEEPEST:
        raise BugkitError("tuples nested too deep")

    for number, kind, _, at, end in protowire.spans(literal):
        if kind != protowire.LENGTH or at == end:
            continue
        payload = literal[at:end]
        if number == _TUPLE:
            if not _finite(payload, depth + 1):
                return False
        elif (name := _FLOATS.get(number)) is not None:
            dtype = np.dtype(name)
            values = np.frombuffer(payload[: len(payload) - len(payload) % dtype.itemsize], dtype)
            if not np.isfinite(values).all():
                return False
        elif (mask := _HALVES.get(number)) is not None:
            bits = np.frombuffer(payload[: len(payload) // 2 * 2], np.dtype("<u2"))
            if ((bits & mask) == mask).any():
                return False
    return True
