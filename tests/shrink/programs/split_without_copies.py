"""Compile crash that only a disabled pass causes (jaxlib 0.10.2, CPU).

Run with XLA_FLAGS=--xla_disable_hlo_passes=copy-insertion: without copy insertion, buffer
assignment finds two constants of jax.random's threefry split sharing one buffer and fails
a CHECK (buffer_assignment_util.cc: const_instr == nullptr) while compiling
jit(_threefry_split). With the pass on, the module compiles and runs.
"""

import jax

key = jax.random.key(0)
keys = jax.random.split(key, 4)
print(jax.random.normal(keys[1], (3,)))
