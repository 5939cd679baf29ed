"""A program that asks for its own dumps of one compilation, as XLA's docs suggest:
``jax.jit(f).lower(x).compile({'xla_dump_to': DIR})``. That module dumps to DIR, not to
XLA_FLAGS's folder; its compile options also turn off all HLO passes, under which the
random numbers abort on a CHECK (see compile_crash.py).

Run: python own_dump_dir.py DIR
"""

import sys

import jax
import jax.numpy as jnp

x = jnp.ones(4)  # helper modules compile into the usual folder first


def add_noise(x):
    return x + jax.random.normal(jax.random.key(0), x.shape)


options = {"xla_dump_to": sys.argv[1], "xla_disable_all_hlo_passes": True}
compiled = jax.jit(add_noise).lower(x).compile(options)
print(compiled(x))
