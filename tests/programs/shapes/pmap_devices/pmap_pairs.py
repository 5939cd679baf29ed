"""Data-parallel work with jax.pmap over 4 CPU devices; one pmapped function runs out of memory.

`python pmap_pairs.py` asks for 4 host devices itself
(`--xla_force_host_platform_device_count=4`, appended to XLA_FLAGS before jax starts) and
splits 2**21 embeddings' norms over them. `standardize`, pmapped with a `lax.pmean` across
the devices, compiles and runs. `pair_scores`, pmapped too, builds each device's dense table
of pairwise products of its 2**19 values, `jnp.outer(x, x) * 2`: 1 TiB of float32 per device.

What XLA does wrong: jit(pmap) of pair_scores compiles; executing it, XLA's CPU runtime fails
to allocate the table (the mechanism of tests/programs/runtime_error.py, through the
multi-device execution path):

    jax.errors.JaxRuntimeError: INTERNAL: Error dispatching computation: Out of memory
    allocating 1099511627776 bytes.

Bare run: exit status 1 (uncaught JaxRuntimeError).
Expected answer: runtime error; culprit pmap(pair_scores) (module jit_pair_scores, a module of
4 replicas; pmap(standardize) is fine); the replay reproduces the error.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np

DEVICES = 4
PER_DEVICE = 1 << 19


@jax.pmap
def pair_scores(x):
    return jnp.outer(x, x) * 2


def standardize(x):
    mean = jax.lax.pmean(jnp.mean(x), "devices")
    var = jax.lax.pmean(jnp.mean((x - mean) ** 2), "devices")
    return (x - mean) / jnp.sqrt(var)


standardize = jax.pmap(standardize, axis_name="devices")


def main() -> None:
    print(f"devices: {jax.local_device_count()}", flush=True)
    norms = np.random.default_rng(0).gamma(4.0, size=(DEVICES, PER_DEVICE)).astype(np.float32)
    z = standardize(norms)
    print(f"standardized: mean {float(z.mean()):.2e}, std {float(z.std()):.4f}", flush=True)
    scores = pair_scores(z)
    print(f"pair scores: {scores.shape}, max {float(scores.max()):.3f}")


if __name__ == "__main__":
    main()
