"""Not XLA's: a Pallas matmul whose own block sizes need more VMEM than the chip has. Each
grid step holds a (4096, 4096) float32 block of each operand and of the output, double-
buffered: about 384 MiB of VMEM against the v5e's 128 MiB. The TPU compiler refuses it
("RESOURCE_EXHAUSTED: ... Ran out of memory in memory space vmem"), with no flag of the
run's; smaller blocks (512) compile and run. The remedy is the program's: its BlockSpecs."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

N, BLOCK = 8192, 4096


def matmul_kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)


@jax.jit
def matmul(a, b):
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((N, N), jnp.float32),
        grid=(N // BLOCK, N // BLOCK),
        in_specs=[
            pl.BlockSpec((BLOCK, N), lambda i, j: (i, 0)),
            pl.BlockSpec((N, BLOCK), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
    )(a, b)


a = jnp.ones((N, N), jnp.float32)
b = jnp.ones((N, N), jnp.float32)
print("sum:", float(matmul(a, b).sum()))
