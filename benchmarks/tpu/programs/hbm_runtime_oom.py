"""Out of HBM at run time, not at compile time: a retrieval job keeps three 4 GiB embedding
shards alive on the chip (12 GiB of 15.75), then asks a jitted step for a 4 GiB result. The
step alone fits the chip (the compiler accepts it); what does not fit is the step beside the
program's own arrays: "Attempting to allocate 4.00G. That was not possible. There are ...
free." An empty chip runs the step."""

import jax
import jax.numpy as jnp

ROWS = 1024 * 1024  # 1M rows of 1024 float32 features: 4 GiB a shard

shards = [jnp.full((ROWS, 1024), 0.5 + i, jnp.float32) for i in range(3)]
jax.block_until_ready(shards)
print("resident:", sum(s.nbytes for s in shards) / 2**30, "GiB")


@jax.jit
def expand_queries(q):
    # One query vector broadcast against every row: a 4 GiB result.
    return jnp.broadcast_to(q[None, :], (ROWS, 1024)) * 2.0


scores = expand_queries(jnp.linspace(0.0, 1.0, 1024, dtype=jnp.float32))
print("scores:", float(scores[0, 1]))
