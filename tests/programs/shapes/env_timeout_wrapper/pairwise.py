"""A job started through wrappers: `env JAX_ENABLE_X64=1 timeout 600 python pairwise.py`.

The whole line is the command: `env` sets JAX_ENABLE_X64=1 (so jax computes in float64),
and coreutils' `timeout` gives the job ten minutes (it runs python as its child, in a
process group of its own). The job standardizes 2**20 float64 readings under jit, which
compiles and runs, then builds the dense table of their pairwise distances,
`jnp.abs(x[:, None] - x[None, :])`, under jit: 8 TiB of float64.

What XLA does wrong: jit(pair_distances) compiles; executing it, XLA's CPU runtime fails to
allocate the table (the mechanism of tests/programs/runtime_error.py):

    jax.errors.JaxRuntimeError: INTERNAL: Error dispatching computation: ...
    Out of memory allocating 8796093022208 bytes.

Bare run: exit status 1 (python's uncaught JaxRuntimeError, passed on by timeout and env).
Expected answer: runtime error; culprit jit(pair_distances) (module jit_pair_distances;
jit(standardize) is fine); the replay reproduces the error.
"""

import jax
import jax.numpy as jnp
import numpy as np

READINGS = 1 << 20


@jax.jit
def standardize(x):
    return (x - jnp.mean(x)) / jnp.std(x)


@jax.jit
def pair_distances(x):
    return jnp.abs(x[:, None] - x[None, :])


def main() -> None:
    readings = jnp.asarray(np.random.default_rng(0).lognormal(size=READINGS))
    print(f"readings: {readings.shape[0]} x {readings.dtype}", flush=True)
    z = standardize(readings)
    print(f"standardized: max |z| {float(jnp.abs(z).max()):.3f}", flush=True)
    table = pair_distances(z)
    print(f"pairwise distances: mean {float(table.mean()):.4f}")


if __name__ == "__main__":
    main()
