"""A program that turns on JAX's persistent compilation cache itself, in each of the three
ways a program can, and then crashes inside XLA's compiler.

The folder comes from its first argument (or ``OWN_CACHE_DIR``): the environment variable
``JAX_COMPILATION_CACHE_DIR``, then ``jax.config.update``, then ``set_cache_dir``, and the
cache is turned back on over collect's ``JAX_ENABLE_COMPILATION_CACHE=false``; the size and
time thresholds go to 0 so that every compiled module would be written there. Its XLA_FLAGS
name XLA's kernel cache in that folder too. A run under collect must leave the folder as it
was: collect defeats the program's caches.

It then crashes as compile_crash.py does: ``--xla_disable_all_hlo_passes=true`` makes XLA's
CPU backend abort on a CHECK while emitting the constants of a random-number computation.
"""

import os
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else os.environ["OWN_CACHE_DIR"]
os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
# XLA's own kernel cache too (a GPU's: the CPU compiler ignores it, but it is in force).
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + (
    f" --xla_disable_all_hlo_passes=true --xla_gpu_kernel_cache_file={folder}/kernels"
)

import jax  # noqa: E402  # the environment must be set before jax reads it
import jax.numpy as jnp  # noqa: E402
from jax.experimental.compilation_cache import compilation_cache  # noqa: E402

jax.config.update("jax_compilation_cache_dir", folder)
compilation_cache.set_cache_dir(folder)
jax.config.update("jax_enable_compilation_cache", True)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

x = jnp.ones(4) * 3.0  # helper modules compile (and are cached) first, as in real programs
print(jnp.tanh(x).sum(), flush=True)


@jax.jit
def add_noise(x):
    return x + jax.random.normal(jax.random.key(0), x.shape)


print(add_noise(x))
