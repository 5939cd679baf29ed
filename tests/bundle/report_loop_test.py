"""A hang the replay reproduces in a module with a while loop may be the loop's own doing:
the report says to check its condition (a float32 tolerance of 1e-10 never holds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.bundle import report
from xla_bugkit.bundle.repro import Repro

pytestmark = pytest.mark.jax  # jax lowers the modules


def _staged(tmp_path: Path, name: str, text: str) -> Repro:
    (tmp_path / f"{name}.txt").write_text(text)
    return Repro(name, True, f"{name}.txt", "", "", False, "")


def test_a_module_with_a_while_loop_is_told_apart(tmp_path: Path) -> None:
    import jax
    import jax.numpy as jnp

    def solve(x: jax.Array) -> jax.Array:
        return jax.lax.while_loop(lambda v: jnp.abs(v).max() > 1e-10, lambda v: v * 0.5, x)

    looping = jax.jit(solve).lower(jnp.ones(4)).as_text(dialect="hlo")
    straight = jax.jit(lambda x: jnp.sin(x) * 2).lower(jnp.ones(4)).as_text(dialect="hlo")
    assert report._has_loop(tmp_path, _staged(tmp_path, "loop", looping))
    assert not report._has_loop(tmp_path, _staged(tmp_path, "straight", straight))
    # A name that merely mentions the word is no loop.
    assert not report._has_loop(tmp_path, _staged(tmp_path, "named", "%while_count = s32[] x\n"))
