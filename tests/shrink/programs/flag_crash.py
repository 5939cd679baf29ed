"""Compile crash that only a flag causes (jaxlib 0.10.2, CPU).

Run with XLA_FLAGS=--xla_cpu_parallel_codegen_split_count=-1: XLA:CPU's code generator
throws std::length_error ("vector::_M_default_append") and the process aborts while
compiling, whatever the module. Any other flags the run has are not needed.
"""

import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.sin(x) * 2.0 + jnp.cos(x)


print(step(jnp.arange(8.0)))
