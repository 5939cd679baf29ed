"""Hang: a jitted while loop whose condition never becomes false runs forever inside XLA."""

import jax
import numpy as np


@jax.jit
def spin(x):
    return jax.lax.while_loop(lambda c: c >= 0, lambda c: (c + 1) % 1000, x)


print("starting", flush=True)
print(spin(np.int32(0)))
