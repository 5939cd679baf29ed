"""A JAX program that crashes the XLA CPU compiler, for trying xla-bugkit.

With every HLO pass disabled (a real XLA debug flag), XLA's CPU backend aborts on the
constants of a random-number computation:

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

Run it under the collector:

    xla-bugkit collect -- python -m xla_bugkit.examples.compile_crash
"""

import os

# Appending keeps any flags already set, the collector's dump flags included.
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax
import numpy as np


@jax.jit
def add_noise(x: jax.Array) -> jax.Array:
    return x + jax.random.normal(jax.random.key(0), x.shape)


if __name__ == "__main__":
    print(add_noise(np.ones(4, np.float32)))
