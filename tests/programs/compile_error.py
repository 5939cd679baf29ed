"""Compile-time error: XLA's CPU compiler returns INTERNAL.

`--xla_cpu_parallel_codegen_split_count=0` makes the CPU backend fail with
`INTERNAL: Too many extra compilation parts due to non-default options (0)`.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_cpu_parallel_codegen_split_count=0"
)

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def train_step(w, x):
    return jnp.tanh(x @ w).sum()


print(train_step(np.ones((4, 4), np.float32), np.ones((2, 4), np.float32)))
