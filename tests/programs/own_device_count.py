"""A program that gives itself 8 CPU devices in ``os.environ["XLA_FLAGS"]`` before importing
jax, shards a step over all of them, and crashes inside XLA's compiler.

Its module is partitioned 8 ways: it compiles only for 8 devices, so the device count is
one of the run's own flags the failure needs, as much as the flag that breaks compilation:
``--xla_disable_all_hlo_passes=true``, under which emitting the constants of the sharded
body's random numbers aborts on a CHECK (see compile_crash.py). The program replaces
XLA_FLAGS rather than appending to it, as some launch scripts do.
"""

import os

os.environ["XLA_FLAGS"] = (
    "--xla_force_host_platform_device_count=8 --xla_disable_all_hlo_passes=true"
)

import jax  # XLA reads XLA_FLAGS once, when jax starts its backend
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

assert jax.device_count() == 8, jax.devices()
mesh = Mesh(jax.devices(), ("i",))


def body(x):
    return jnp.tanh(x) + jax.random.normal(jax.random.key(0), x.shape)


step = jax.jit(
    jax.shard_map(body, mesh=mesh, in_specs=PartitionSpec("i"), out_specs=PartitionSpec("i"))
)
print(step(jnp.arange(32.0)))
