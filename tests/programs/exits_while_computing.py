"""A program that dispatches a long computation and exits at once with status 3, its
result never read: bare, it exits 3. Under collect the hook's watch on the outputs must not
change that (a thread waiting inside jaxlib as the interpreter exits aborts the process).

Run: python exits_while_computing.py
"""

import sys

import jax
import jax.numpy as jnp


@jax.jit
def heavy(x):
    for _ in range(8):
        x = jnp.tanh(x @ x)
    return x


y = heavy(jnp.ones((1500, 1500)))
sys.exit(3)
