"""Not an XLA bug: the program's own Python check raises ValueError after real jax work.

XLA compiles and runs jit(normalize) correctly; the failure is the program's own mistake
(it expects 3 values and gets 4), so collect must say this does not look like an XLA bug.
"""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def normalize(x):
    return x / jnp.linalg.norm(x)


def check_shape(x):
    if x.shape != (3,):
        raise ValueError(f"expected a vector of 3 values, got shape {x.shape}")


y = normalize(np.arange(4.0, dtype=np.float32))
print(y)
check_shape(y)
