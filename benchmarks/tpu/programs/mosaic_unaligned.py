"""A Pallas kernel Mosaic refuses: a window of 128 lanes read at a dynamic offset that is
not provably a multiple of 128 (a sliding-window feature extractor)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

STRIDE = 3  # the window moves 3 lanes a step: Mosaic cannot prove the alignment


def window_kernel(x_ref, o_ref):
    step = pl.program_id(0)
    o_ref[...] = x_ref[:, pl.ds(step * STRIDE, 128)] * 2.0


@jax.jit
def features(x):
    return pl.pallas_call(
        window_kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        grid=(4,),
    )(x)


x = np.arange(8 * 1024, dtype=np.float32).reshape(8, 1024)
print("features:", np.asarray(features(x)).sum())
