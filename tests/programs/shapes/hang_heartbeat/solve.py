"""A solver service with a heartbeat thread; its jitted Jacobi loop never ends.

`python solve.py` starts a daemon thread that prints `heartbeat: N s` every second (as
services do for their supervisor), so the output never goes quiet. The main thread warms
up two jitted helpers, then solves a 64x64 system in float32 with a jitted
`lax.while_loop` that iterates until the residual is below 1e-9.

What goes wrong inside XLA: float32 cannot get the residual that low. The iteration reaches
a fixed point whose residual is 3.6e-7 after a few dozen steps and stays there, so the
loop's condition is true forever and XLA's CPU runtime executes jit(solve) without end. The
heartbeat keeps printing from the other thread the whole time (XLA's execution holds no
Python lock), which is what a supervisor, or a tool watching for silence, sees.

Bare run: it never ends; stopped by `collect --timeout 90` (the benchmark passes it with
`collect_args`), or killed.
Expected answer: hang, stopped by the timeout, with XLA executing jit(solve) (module
jit_solve); the replay reproduces the hang.
"""

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

SIZE = 64
TOLERANCE = 1e-9  # below what float32 can reach: the bug in this program, not XLA's


def heartbeat(started: float) -> None:
    while True:
        time.sleep(1.0)
        print(f"heartbeat: {time.monotonic() - started:.0f} s", flush=True)


def system(seed: int = 0) -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((SIZE, SIZE)) * 0.1 + 4.0 * np.eye(SIZE)
    b = rng.standard_normal(SIZE)
    return jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)


@jax.jit
def residual(a, b, x):
    return jnp.max(jnp.abs(a @ x - b))


@jax.jit
def jacobi_step(a, b, x):
    d = jnp.diag(a)
    return (b - (a - jnp.diag(d)) @ x) / d


@jax.jit
def solve(a, b):
    def not_converged(state):
        x, _ = state
        return residual(a, b, x) > TOLERANCE

    def step(state):
        x, steps = state
        return jacobi_step(a, b, x), steps + 1

    return jax.lax.while_loop(not_converged, step, (jnp.zeros_like(b), jnp.int32(0)))


def main() -> None:
    threading.Thread(target=heartbeat, args=(time.monotonic(),), daemon=True).start()
    a, b = system()
    x = jnp.zeros_like(b)
    for _ in range(3):
        x = jacobi_step(a, b, x)
    print(f"warm-up: residual after 3 steps {float(residual(a, b, x)):.3g}", flush=True)
    print(f"solving to a residual of {TOLERANCE:g}", flush=True)
    x, steps = solve(a, b)
    print(f"solved in {int(steps)} steps, residual {float(residual(a, b, x)):.3g}")


if __name__ == "__main__":
    main()
