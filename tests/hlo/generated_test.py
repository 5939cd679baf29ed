"""Generated inputs: one stream, the same in the replay, shrink and the bundle's repro.py."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import generated
from xla_bugkit.shrink.session import replay_inputs

TYPES = [
    (np.dtype(np.float32), (3, 4)),
    (np.dtype(np.bool_), (5,)),
    (np.dtype(np.int32), (2, 2)),
    (np.dtype(np.uint8), ()),
    (np.dtype(np.complex64), (3,)),
    (np.dtype(ml_dtypes.bfloat16), (4,)),
    (np.dtype(ml_dtypes.int4), (6,)),
    (np.dtype(np.float64), (0, 3)),
]


def _template_draw() -> Any:
    """repro.py's own ``draw``, taken from the template it is written from."""
    text = resources.files("xla_bugkit.templates").joinpath("repro.py.in").read_text("utf-8")
    source = re.search(r"^def draw\(.*?(?=^\S)", text, re.M | re.S)
    assert source is not None, "repro.py.in has no draw()"
    namespace: dict[str, Any] = {"np": np}
    exec(source.group(0), namespace)
    return namespace["draw"]


def _equal(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert [x.dtype for x in a] == [y.dtype for y in b]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))


def test_repro_py_draws_the_replays_values() -> None:
    draw = _template_draw()
    rng = np.random.default_rng(generated.SEED)
    theirs = [draw(dtype, tuple(dims), rng) for dtype, dims in TYPES]
    _equal(generated.generated(TYPES), theirs)


def test_shrink_draws_the_replays_values_from_hlo_shapes() -> None:
    shapes = [
        "f32[3,4]{1,0}",
        "pred[5]",
        "s32[2,2]",
        "u8[]",
        "c64[3]",
        "bf16[4]",
        "s4[6]",
        "f64[0,3]",
    ]
    _equal(replay_inputs(shapes), generated.generated(TYPES))


def test_the_stream_is_seeded_and_its_kinds_are_as_documented() -> None:
    first, again = generated.generated(TYPES), generated.generated(TYPES)
    _equal(first, again)
    assert set(np.unique(first[1])) <= {False, True}
    assert set(np.unique(first[2])) <= {0, 1, 2, 3}
    assert generated.generated(TYPES, seed=7)[0].tolist() != first[0].tolist()


def test_a_shape_without_a_dtype_is_refused() -> None:
    with pytest.raises(BugkitError, match=r"cannot make inputs for a parameter of type token\[\]"):
        generated.array_type("token[]")
