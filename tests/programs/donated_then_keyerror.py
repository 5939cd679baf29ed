"""Not XLA's: a training loop whose jitted step donates its parameters (``donate_argnums``,
as nearly every training loop does), then fails in its own Python: a ``KeyError`` in its
report. Each step's outputs are donated to the next step, so the buffers of every output but
the last are gone when the program fails: a capture hook that waits on them at the end meets
"INVALID_ARGUMENT: BlockHostUntilReady() called on deleted or donated buffer", its own error,
which must never stand for the program's (jaxlib 0.10.2, CPU).
"""

from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, donate_argnums=0)
def step(params, x):
    loss = jnp.sum((params * x) ** 2)
    return params - 0.01 * params * x, loss


params = jnp.ones((256,))
x = jnp.arange(256.0)
history = {}
for i in range(5):
    params, loss = step(params, x)
    history[f"step{i}"] = float(loss)
print("loss at step 7:", history["step7"])
