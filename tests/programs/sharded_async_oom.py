"""An out-of-memory failure inside a sharded computation that surfaces one computation later.

Two forced host devices; a shard_map builds each shard's pairwise-distance matrix
(2**19 x 2**19 float32: 1 TiB per device) under the program's own 8 GiB address-space cap,
so XLA fails to allocate it whatever the machine (``Out of memory allocating 1099511627776
bytes``). XLA runs the computation asynchronously: the error reaches Python only when the
next computation, ``jnp.mean`` of its result, is dispatched, wrapped as ``INTERNAL: Error
dispatching computation: ...``. The execution that raised is not the one that failed; the
size XLA could not allocate, in the failing module's buffer assignment, says which did.

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


@jax.jit
def nearest_gap(points):
    def local(p):
        d = (p[:, None, 0] - p[None, :, 0]) ** 2 + 1e9 * jnp.eye(p.shape[0], dtype=p.dtype)
        return jnp.min(d, axis=1)

    spec = PartitionSpec("rows")
    return jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec)(points)


points = jax.device_put(
    np.random.default_rng(0).standard_normal((ROWS, 1)).astype(np.float32),
    NamedSharding(mesh, PartitionSpec("rows")),
)
gap = nearest_gap(points)
print("mean nearest gap", float(jnp.mean(gap)))
