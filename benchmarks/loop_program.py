"""A training loop over a given size of state, for the snapshot benchmark.

    python benchmarks/loop_program.py STEPS STATE_MB

Four square float32 weight matrices (STATE_MB in all) trained for STEPS jitted steps of a
tanh network with plain gradient descent: the shape of a real training loop, where each
step's arguments are the whole state.
"""

import sys
import time

import jax
import jax.numpy as jnp


def main() -> None:
    steps, state_mb = int(sys.argv[1]), int(sys.argv[2])
    n = int((state_mb * 2**20 / 4 / 4) ** 0.5)
    key = jax.random.key(0)
    params = [jax.random.normal(jax.random.fold_in(key, i), (n, n)) * 0.01 for i in range(4)]
    x = jnp.ones((64, n))

    @jax.jit
    def step(params, x):  # type: ignore[no-untyped-def]
        def loss(p):  # type: ignore[no-untyped-def]
            h = x
            for w in p:
                h = jnp.tanh(h @ w)
            return (h**2).mean()

        value, grads = jax.value_and_grad(loss)(params)
        return [w - 0.01 * g for w, g in zip(params, grads, strict=True)], value

    started = time.perf_counter()
    for _ in range(steps):
        params, value = step(params, x)
    value.block_until_ready()
    took = time.perf_counter() - started
    print(f"{steps} steps of {n}x{n}x4: loss {float(value):.6f}, {took:.2f} s")


if __name__ == "__main__":
    main()
