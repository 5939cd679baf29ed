"""Ahead-of-time executables: the first runs out of memory while the program calls the second.

Two forced host devices. The program compiles two functions ahead of time with
``jax.jit(f).lower(...).compile()`` and calls the ``Compiled`` objects directly, as a
serving process does: ``nearest_gap``, a shard_map that builds each shard's
pairwise-distance matrix (2**19 x 2**19 float32: 1 TiB per device) under the program's own
8 GiB address-space cap, so XLA fails to allocate it whatever the machine
(``Out of memory allocating 1099511627776 bytes``), then ``spread``, the mean and spread of
its result. XLA runs ``nearest_gap`` asynchronously: its call returns at once, and its error
reaches Python only in the call of ``spread`` on its output, wrapped as ``INTERNAL: Error
dispatching computation: ...``. The call that raised is not the one that failed.

Expected answer: runtime error (out of memory) in jit(nearest_gap) (module
jit_nearest_gap); spread's call only met the error; the replay reproduces it.
Exit status: 1 (jax.errors.JaxRuntimeError).
"""

import os
import resource

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
)
CAP = 8 << 30
resource.setrlimit(resource.RLIMIT_AS, (CAP, resource.getrlimit(resource.RLIMIT_AS)[1]))

import jax  # noqa: E402  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

ROWS = 2 * 2**19
mesh = Mesh(jax.devices(), ("rows",))
rows = NamedSharding(mesh, PartitionSpec("rows"))


def nearest_gap(points):
    def local(p):
        d = (p[:, None, 0] - p[None, :, 0]) ** 2 + 1e9 * jnp.eye(p.shape[0], dtype=p.dtype)
        return jnp.min(d, axis=1)

    spec = PartitionSpec("rows")
    return jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec)(points)


def spread(gap):
    return jnp.stack([jnp.mean(gap), jnp.std(gap)])


points_type = jax.ShapeDtypeStruct((ROWS, 1), jnp.float32, sharding=rows)
gaps_type = jax.ShapeDtypeStruct((ROWS,), jnp.float32, sharding=rows)
gap_exe = jax.jit(nearest_gap).lower(points_type).compile()
spread_exe = jax.jit(spread).lower(gaps_type).compile()
print("compiled nearest_gap and spread", flush=True)

values = np.random.default_rng(0).standard_normal((ROWS, 1)).astype(np.float32)
points = jax.device_put(values, rows)
gap = gap_exe(points)
print("nearest gap: mean, std", np.asarray(spread_exe(gap)))
