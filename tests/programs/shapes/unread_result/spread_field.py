"""A job that spreads a 16 MB field and reads back a result XLA could not allocate.

``spread`` asks for a 4 TiB result. With a small input, jax raises RESOURCE_EXHAUSTED when
the result is read. With this 16 MB float32 input, the execution's failure is not raised:
reading the result into numpy aborts the process inside XLA, on
``raw_buffer.h:106] Check failed: buffer_.IsConcrete()`` (SIGABRT), jaxlib 0.10.2 on CPU.

Expected: a process crash of jit(spread). Replaying it gets the allocation's own status,
RESOURCE_EXHAUSTED, which is the same failure (reproduced: error).
"""

import jax
import jax.numpy as jnp
import numpy as np

field = np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32)
print(f"field: {field.size} x float32")


@jax.jit
def spread(x):
    return jnp.broadcast_to(x.sum(), (1 << 20, 1 << 20)) * 2


print(spread(field))  # numpy reads the whole result
