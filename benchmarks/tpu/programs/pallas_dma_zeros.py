"""A Pallas kernel copies the first row of an HBM operand out through VMEM; with a second
operand it never reads, made inside the jit, the row comes back as zeros on libtpu 0.0.42
(public report jax-ml/jax#39744)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def first_row(src, _mask, out, buf):
    pltpu.sync_copy(src.at[pl.ds(0, 1), :], buf)
    pltpu.sync_copy(buf, out)


def in_hbm(shape):
    return pl.BlockSpec(shape, memory_space=pltpu.HBM)


copy = pl.pallas_call(
    first_row,
    out_shape=jax.ShapeDtypeStruct((1, 256), jnp.float32),
    in_specs=[in_hbm((2, 256)), in_hbm((16, 128))],
    out_specs=in_hbm((1, 256)),
    scratch_shapes=[pltpu.VMEM((1, 256), jnp.float32)],
    grid=(1,),
)


@jax.jit
def head(src):
    return copy(src, jnp.ones((16, 128), jnp.float32))


src = np.random.default_rng(1).standard_normal((2, 256)).astype(np.float32)
got = np.asarray(head(src))
if not np.array_equal(got[0], src[0]):
    raise SystemExit(f"first row wrong: {np.count_nonzero(got[0] != src[0])} of 256 differ")
print("ok")
