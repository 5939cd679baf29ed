"""A hang the replay reproduces in a module with a while loop may be the loop's own doing:
the report says to check its condition (a float32 tolerance of 1e-10 never holds)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from xla_bugkit.bundle import report

pytestmark = pytest.mark.jax  # jax lowers the modules, in a child: tests after this one fork

LOWER = """
import sys, jax, jax.numpy as jnp
def solve(x):
    return jax.lax.while_loop(lambda v: jnp.abs(v).max() > 1e-10, lambda v: v * 0.5, x)
f = solve if sys.argv[1] == "loop" else (lambda x: jnp.sin(x) * 2)
print(jax.jit(f).lower(jnp.ones(4)).as_text(dialect="hlo"))
"""


def _lowered(kind: str) -> str:
    done = subprocess.run([sys.executable, "-c", LOWER, kind], capture_output=True, text=True,
                          timeout=600, check=True)  # fmt: skip
    return done.stdout


def test_a_module_with_a_while_loop_is_told_apart() -> None:
    assert report._has_loop(_lowered("loop"))
    assert not report._has_loop(_lowered("straight"))
    # A name that merely mentions the word is no loop.
    assert not report._has_loop("%while_count = s32[] x\n")
