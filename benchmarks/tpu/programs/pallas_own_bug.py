"""A Pallas kernel whose own code is wrong: it means to copy the first row of its operand and
indexes the second. Compiled and in Pallas's interpret mode alike it returns the second row,
so the program's check fails under both: the kernel's bug, not XLA's or Mosaic's."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def first_row(src, out):
    out[...] = src[pl.ds(1, 1), :]  # the bug: row 1, where row 0 was meant


copy = pl.pallas_call(first_row, out_shape=jax.ShapeDtypeStruct((1, 256), jnp.float32))


@jax.jit
def head(src):
    return copy(src) * 1.0


src = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)
got = np.asarray(head(src))
if not np.array_equal(got[0], src[0]):
    raise SystemExit(f"first row wrong: {np.count_nonzero(got[0] != src[0])} of 256 differ")
print("ok")
