"""A jitted solver whose second call never returns: jax ran it through its C++ fast path.

`python solve.py` solves a 64x64 system twice with the same jitted Jacobi `lax.while_loop`,
which iterates until the residual is below a tolerance passed as an argument. The first call
asks for 1e-4 and returns after a few dozen steps. The second asks for 1e-9, which float32
cannot reach: the iteration settles at a residual near 4e-7 and the loop's condition stays
true, so XLA's CPU runtime executes jit(solve) without end.

What makes it hard: the second call has the first call's shapes, so jax dispatches it from
C++ without entering Python. Nothing in Python records it, XLA writes no snapshot of an
execution that never ends, and the stack shows only this file's line. The first call's
inputs converge, so replaying them proves nothing.

Bare run: it never ends; stop it (Ctrl-C, or `collect --timeout`).
Expected answer: hang, with XLA executing jit(solve) (module jit_solve) in its second call;
the replay on that call's own inputs (tolerance 1e-9) hangs.
"""

import jax
import jax.numpy as jnp
import numpy as np

SIZE = 64


@jax.jit
def solve(a, b, tolerance):
    diagonal = jnp.diag(a)

    def step(state):
        x, _ = state
        x = (b - (a @ x - diagonal * x)) / diagonal
        return x, jnp.max(jnp.abs(a @ x - b))

    x, residual = jax.lax.while_loop(
        lambda state: state[1] > tolerance, step, (jnp.zeros_like(b), jnp.float32(jnp.inf))
    )
    return x, residual


rng = np.random.default_rng(0)
a = jnp.asarray(rng.standard_normal((SIZE, SIZE)) * 0.1 + 4.0 * np.eye(SIZE), jnp.float32)
b = jnp.asarray(rng.standard_normal(SIZE), jnp.float32)

x, residual = solve(a, b, jnp.float32(1e-4))
print(f"solved to a residual of {float(residual):.2e}", flush=True)
tolerance = jnp.float32(1e-9)
print(f"solving again to a residual of {float(tolerance):.0e}", flush=True)
x, residual = solve(a, b, tolerance)
print(f"solved to a residual of {float(residual):.2e}", flush=True)
