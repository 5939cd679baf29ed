"""A program that works: collect must say "no failure seen"."""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def train_step(w, x):
    return jnp.tanh(x @ w).sum()


print(train_step(np.ones((4, 4), np.float32), np.ones((2, 4), np.float32)))
