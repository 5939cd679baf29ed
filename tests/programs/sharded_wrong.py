"""A silent wrong result inside a jit sharded over two forced host devices.

jax#39103 (the bug of wrong_result.py): under jit on CPU, jaxlib 0.10.2 fuses
``vmap(lambda row: sum((M @ row) ** 2))`` into a YNNPACK fusion that reads another row for
the element just past the first 128 KiB of its output. Sharded by rows over two devices,
each device's part has 16385 float64 rows, so each shard holds such an element. XLA writes
no snapshot of a multi-device execution: the real inputs reach the bundle only through
the capture hook.

Exit status: 1 when the sharded result differs from numpy (jaxlib 0.10.2 on CPU), else 0.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
)

import jax  # the flag must be in XLA_FLAGS before jax starts XLA

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

ROWS = 2 * 16_385
mesh = Mesh(jax.devices(), ("rows",))
matrix = jnp.eye(3)


@jax.jit
def energies(x):
    return jax.vmap(lambda row: jnp.sum((matrix @ row) ** 2))(x)


def features(rows):
    # The input: row k is (k, 0, 0), so the right energy of row k is k**2.
    k = np.arange(rows, dtype=np.float64)
    return np.stack((k, np.zeros_like(k), np.zeros_like(k)), axis=1)


x_np = features(ROWS)
x = jax.device_put(x_np, NamedSharding(mesh, PartitionSpec("rows")))
got = np.asarray(energies(x))
want = (x_np**2).sum(axis=1)
bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-5))
if bad.size:
    raise SystemExit(f"wrong result: {bad.size} sharded energies differ from numpy")
print("ok: the sharded energies match numpy")
