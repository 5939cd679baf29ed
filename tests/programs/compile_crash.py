"""Compile-time crash: XLA's CPU backend aborts (SIGABRT) on a CHECK.

With --xla_disable_all_hlo_passes=true, emitting the constants of a random-number
computation fails `buffer_assignment_util.cc:46] Check failed: const_instr == nullptr`.
The program appends its flag to XLA_FLAGS, as many training scripts do.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax
import jax.numpy as jnp

x = jnp.ones(4)  # compiles helper modules first, as real programs do


@jax.jit
def add_noise(x):
    return x + jax.random.normal(jax.random.key(0), x.shape)


print(add_noise(x))
