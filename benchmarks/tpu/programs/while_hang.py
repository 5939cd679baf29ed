"""A solver whose loop never ends: the tolerance test compares against a residual that the
update cannot shrink (a hang inside jit(solve) on the device)."""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def solve(a, b):
    def cond(state):
        _, res, _ = state
        return res > 1e-30

    def body(state):
        x, _, n = state
        x = x + 0.0 * (b - a @ x)
        return x, jnp.linalg.norm(b - a @ x) + 1.0, n + 1

    x, _, n = jax.lax.while_loop(cond, body, (jnp.zeros_like(b), jnp.float32(1.0), 0))
    return x, n


a = np.eye(64, dtype=np.float32) * 2
b = np.ones(64, np.float32)
print("solving", flush=True)
x, n = solve(a, b)
print("iterations:", int(n))
