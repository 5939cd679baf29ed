"""A solver warm-started from its own last answer; its second call never ends.

`python later_hang_rebound.py` solves a 64x64 system with a jitted Jacobi `lax.while_loop`
twice, each call starting from the previous call's solution: `x, residual = solve(a, b, x,
tolerance)`. The first call asks for a residual of 1e-4; the second for 1e-9, which float32
cannot reach (the iteration settles near 4e-7), so XLA's CPU runtime executes it without end.

What makes it hard: jax dispatches the second call from C++ and returns at once (XLA runs it
on its own threads), so the program is found waiting for `residual`, and by then `x` names
the hung call's output, not its input: the call's own inputs cannot be read. Under XLA's
snapshot of every execution the call returns only once it has run, so a second run finds
the thread inside the call, where `x` is still its input.

Expected answer: hang in jit(solve); collect runs the program again to read the hung call's
inputs, and the replay on them hangs.
"""

import jax
import jax.numpy as jnp
import numpy as np

SIZE = 64


@jax.jit
def solve(a, b, x0, tolerance):
    diagonal = jnp.diag(a)

    def step(state):
        x, _ = state
        x = (b - (a @ x - diagonal * x)) / diagonal
        return x, jnp.max(jnp.abs(a @ x - b))

    return jax.lax.while_loop(lambda state: state[1] > tolerance, step, (x0, jnp.float32(jnp.inf)))


rng = np.random.default_rng(0)
a = jnp.asarray(rng.standard_normal((SIZE, SIZE)) * 0.1 + 4.0 * np.eye(SIZE), jnp.float32)
b = jnp.asarray(rng.standard_normal(SIZE), jnp.float32)
x = jnp.zeros(SIZE, jnp.float32)
for wanted in (1e-4, 1e-9):
    tolerance = jnp.float32(wanted)
    print(f"solving to a residual of {wanted:.0e}", flush=True)
    x, residual = solve(a, b, x, tolerance)
    print(f"solved to a residual of {float(residual):.2e}", flush=True)
