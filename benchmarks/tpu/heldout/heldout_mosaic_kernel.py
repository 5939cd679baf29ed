"""A Pallas TPU kernel that crops a 128-wide window out of each packed row block.

Each block of 8 rows of a packed (64, 1024) feature buffer holds one record whose payload
starts at a per-record offset; the offsets are read from SMEM (scalar prefetch) and the
kernel loads x_ref[:, pl.ds(offset, 128)]. The offsets come from the data (17, 250, ...),
so Mosaic cannot prove that the lane index is a multiple of 128 and refuses the kernel at
compile time of jit(crop_records): "Mosaic failed to compile TPU kernel".
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS, WIDTH, BLOCK, WINDOW = 64, 1024, 8, 128


def crop_kernel(offsets_ref, x_ref, o_ref):
    start = offsets_ref[pl.program_id(0)]
    window = x_ref[:, pl.ds(start, WINDOW)]
    o_ref[...] = window - jnp.mean(window, axis=-1, keepdims=True)


@jax.jit
def crop_records(offsets, x):
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(ROWS // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK, WIDTH), lambda i, offs: (i, 0))],
        out_specs=pl.BlockSpec((BLOCK, WINDOW), lambda i, offs: (i, 0)),
    )
    return pl.pallas_call(
        crop_kernel,
        out_shape=jax.ShapeDtypeStruct((ROWS, WINDOW), jnp.float32),
        grid_spec=spec,
    )(offsets, x)


rng = np.random.default_rng(0)
x = rng.standard_normal((ROWS, WIDTH)).astype(np.float32)
offsets = np.array([17, 250, 3, 640, 129, 511, 88, 896], np.int32)
print(f"cropping {ROWS // BLOCK} records of {WINDOW} lanes", flush=True)
out = np.asarray(crop_records(offsets, x))
want = np.concatenate(
    [x[i * BLOCK : (i + 1) * BLOCK, o : o + WINDOW] for i, o in enumerate(offsets)]
)
print("max error:", float(np.abs(out - (want - want.mean(-1, keepdims=True))).max()))
