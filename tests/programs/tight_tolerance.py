"""A running mean checked in float64 with a tolerance float32 cannot hold: XLA computes it
correctly (as its own references do), and the program's check still fails. Not an XLA bug:
the report should say what the values rest on, and point at the check."""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def running_mean(x):  # type: ignore[no-untyped-def]
    return jnp.cumsum(x) / jnp.arange(1, x.size + 1, dtype=x.dtype)


x = jnp.full((100_000,), 0.1, jnp.float32)
np.testing.assert_allclose(np.asarray(running_mean(x)), np.full(x.size, 0.1), rtol=1e-9)
