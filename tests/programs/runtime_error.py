"""Runtime error: the module compiles, then XLA fails to allocate its 4 TiB result.

`RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.` at execution.
"""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def make_buffer(x):
    return jnp.broadcast_to(x, (1 << 20, 1 << 20)) * 2


print(make_buffer(np.float32(1))[0, 0])
