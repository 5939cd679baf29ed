"""A Pallas kernel that fails only under the TPU compiler flag its run sets in
LIBTPU_INIT_ARGS: its blocks (2 MiB in, 2 MiB out, each double-buffered: 8 MiB of VMEM) fit
the chip's default scoped VMEM limit (16 MiB on a v5e), not the 4 MiB that
--xla_tpu_scoped_vmem_limit_kib=4096 leaves. Bare, with no flag, it runs.
benchmarks/tpu/visit.sh runs it with the flag named on the line below."""

# LIBTPU_INIT_ARGS: --xla_tpu_scoped_vmem_limit_kib=4096

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS, COLS, BLOCK = 2048, 1024, 512


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


@jax.jit
def normalize(x):
    block = pl.BlockSpec((BLOCK, COLS), lambda i: (i, 0))
    return pl.pallas_call(
        scale_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(ROWS // BLOCK,),
        in_specs=[block],
        out_specs=block,
    )(x)


x = jnp.ones((ROWS, COLS), jnp.float32)
print("normalized:", float(normalize(x)[0, 0]))
