"""A shard_map over 4 forced host devices that fails inside XLA: the recorded device count
must reach the bundle (a sharded module replays only on as many devices).

The program sets both flags itself before importing jax: 4 CPU devices, and
``--xla_disable_all_hlo_passes=true``, under which compiling the random numbers of the
sharded body aborts on a CHECK (see compile_crash.py).
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + (
    " --xla_force_host_platform_device_count=4 --xla_disable_all_hlo_passes=true"
)

import jax  # the flags must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

mesh = Mesh(jax.devices(), ("i",))


def body(x):
    return x + jax.random.normal(jax.random.key(0), x.shape)


noisy = jax.jit(
    jax.shard_map(body, mesh=mesh, in_specs=PartitionSpec("i"), out_specs=PartitionSpec("i"))
)
print(noisy(jnp.arange(16.0)))
