"""Compile crash caused by an option the program passes to one compile, not by XLA_FLAGS.

`jax.jit(..., compiler_options={"xla_disable_hlo_passes": "copy-insertion"})`: without copy
insertion, buffer assignment finds two constants of jax.random's threefry split sharing a
buffer and fails a CHECK (buffer_assignment_util.cc: const_instr == nullptr) while compiling
jit(sample_noise) (jaxlib 0.10.2, CPU). With the pass on, it compiles and runs.
"""

import jax
import jax.numpy as jnp


def sample_noise(key, scale):
    first, second = jax.random.split(key)
    return scale * jax.random.normal(first, (4,)) + jax.random.uniform(second, (4,))


noisy = jax.jit(sample_noise, compiler_options={"xla_disable_hlo_passes": "copy-insertion"})
print(noisy(jax.random.key(0), jnp.float32(0.5)))
