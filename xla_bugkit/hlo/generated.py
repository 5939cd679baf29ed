"""Inputs for a module that has no recorded ones: one seeded stream, one array per parameter.

The replay, ``verify``, ``shrink`` and the bundle's repro.py all draw these same values, so a
failure that shows on them shows everywhere. repro.py runs without xla-bugkit and carries its
own copy of ``draw`` (xla_bugkit/templates/repro.py.in); a test holds the two equal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from xla_bugkit.errors import BugkitError

SEED = 42  # what "generated (seed 42)" in a verdict means
ArrayType = tuple[np.dtype[Any], Sequence[int]]  # a parameter's dtype and dimensions


def draw(dtype: np.dtype[Any], dims: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """The next array of the stream: normal values, or small integers (they often index, and
    out-of-range indices are clamped anyway), or booleans."""
    dims = tuple(dims)
    if dtype == np.bool_:
        return rng.integers(0, 2, dims).astype(np.bool_)
    if dtype.kind in "iu" or dtype.name.startswith(("int", "uint")):  # ml_dtypes' int4 too
        return rng.integers(0, 4, dims).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    return rng.standard_normal(dims).astype(dtype)


def generated(types: Sequence[ArrayType], seed: int = SEED) -> list[np.ndarray]:
    """The seeded inputs of a module whose parameters have these ``types``, in order."""
    rng = np.random.default_rng(seed)
    return [draw(dtype, dims, rng) for dtype, dims in types]


_SHAPE = re.compile(r"^(?P<type>[a-z]+\d*[a-z0-9]*)\[(?P<dims>[\d,]*)\]")


def _dtype_named(name: str) -> np.dtype[Any] | None:
    """The dtype of XLA's short type name (``f32``, ``bf16``), where numpy has one."""
    # Imported here: they build the proto classes, only when needed.
    from xla_bugkit.hlo.hlo_proto import PrimitiveType
    from xla_bugkit.hlo.literal import dtype_of

    ptype = PrimitiveType.__members__.get(name.upper())
    return None if ptype is None or name != name.lower() else dtype_of(ptype)


def array_type(shape: str) -> ArrayType:
    """The dtype and dimensions of an HLO array shape as printed: ``f32[2,3]{1,0}``."""
    found = _SHAPE.match(shape)
    dtype = None if found is None else _dtype_named(found.group("type"))
    if found is None or dtype is None:
        raise BugkitError(f"cannot make inputs for a parameter of type {shape}")
    dims = tuple(int(d) for d in found.group("dims").split(",") if d)
    return dtype, dims
