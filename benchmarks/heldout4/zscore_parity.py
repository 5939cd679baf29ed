"""Parity check of the jitted feature normaliser against the numpy implementation it
replaced.

`normalise` (jitted) computes per-column z-scores with `jnp.std`, the population standard
deviation (ddof=0), exactly as the old pandas-free pipeline did. The parity test's numpy
reference was rewritten from a notebook and uses `np.std(..., ddof=1)`, the sample
standard deviation, so every value differs by a factor sqrt((n-1)/n) (about 0.4% for
n=128) and `np.testing.assert_allclose(..., rtol=1e-4)` fails. XLA computed the right
numbers; the reference is the program's own mistake: not XLA's.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def normalise(x):
    mu = jnp.mean(x, axis=0)
    sd = jnp.std(x, axis=0)
    return (x - mu) / sd


def reference(x):
    return (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)


def main():
    rng = np.random.default_rng(8)
    failures = 0
    for name, scale in (("clicks", 40.0), ("dwell", 3.5), ("price", 120.0)):
        x = (rng.lognormal(0.0, 1.0, size=(128, 16)) * scale).astype(np.float32)
        got = np.asarray(normalise(x))
        try:
            np.testing.assert_allclose(
                got, reference(x), rtol=1e-4, atol=1e-6, err_msg=f"feature group {name}"
            )
            print(f"[parity] {name}: ok")
        except AssertionError as e:
            failures += 1
            print(f"[parity] {name}: FAILED\n{e}", flush=True)
    if failures:
        sys.exit(f"{failures} feature group(s) failed parity; not promoting the jitted normaliser")


if __name__ == "__main__":
    main()
