"""A program that sets its own XLA flag before importing jax, and fails only with it.

``--xla_backend_extra_options`` passes options to LLVM; an option LLVM does not know makes
XLA's CPU compiler exit with status 1 (``xla: Unknown command line argument``) at the first
compilation. The flag is a map: a dumped ``debug_options`` file cannot spell it as a flag,
so only the flags in force in the process tell a replay about it.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_extra_options=-xla-bugkit-no-such-option"
)

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x) * 2.0


print(step(jnp.ones(8)))
