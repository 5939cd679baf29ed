"""A training script that logs its command line, then fails in XLA's CPU compiler.

Real programs print their configuration, tokens and passwords included, before they start;
none of it may reach a bundle. The failure is compile_error.py's:
`--xla_cpu_parallel_codegen_split_count=0` makes the CPU backend return
`INTERNAL: Too many extra compilation parts due to non-default options (0)`.
"""

import os
import sys

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_cpu_parallel_codegen_split_count=0"
)

import jax
import jax.numpy as jnp
import numpy as np

print("argv:", sys.argv[1:])
print("command line:", " ".join(sys.argv[1:]))


@jax.jit
def train_step(w, x):
    return jnp.tanh(x @ w).sum()


print(train_step(np.ones((4, 4), np.float32), np.ones((2, 4), np.float32)))
