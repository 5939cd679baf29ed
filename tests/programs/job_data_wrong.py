"""A wrong result of a ``jax.distributed`` job that only one host's data shows.

``python job_data_wrong.py RANK N PORT``: process RANK of N on localhost CPU, 2 devices each,
started as a cluster starts them (one command per process). Each process reads its own part
of the batch: feature rows, and a label per row. The step keeps a row's features where its
label is a new class (4 and up) and puts a constant row in their place otherwise, then sums
``(M @ row) ** 2`` per row (jax-ml/jax#39103, as in sharded_wrong.py): jaxlib 0.10.2 on CPU
fuses the mat-vec, the square and the sum into one YNNPACK fusion whose element just past its
output's first 128 KiB (each device's shard holds 16385 float64 rows) holds another row's
value. That is visible only where the rows differ: process 0's labels are all old classes
(0 to 3), so its rows are all the constant and its devices' results are right; the last
process's labels include new classes, and its devices' results are wrong. Inputs generated
for a replay (small integer labels) make every row the constant, and so the right result.

Process 0 gathers the result, the rows and the labels, checks the step against numpy and
exits 1 when they disagree; the others wait for it at a barrier until the job ends them, or,
with a fourth argument ``finish``, end at once and succeed.
JOB_STEP_HEARTBEAT sets the coordination service's heartbeat timeout (seconds).
"""

import os
import sys

rank, processes, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
finish = sys.argv[4:] == ["finish"]
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
)

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts it)

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_enable_x64", True)
heartbeat = int(os.environ.get("JOB_STEP_HEARTBEAT", "100"))
jax.distributed.initialize(
    f"127.0.0.1:{port}",
    num_processes=processes,
    process_id=rank,
    heartbeat_timeout_seconds=heartbeat,
    shutdown_timeout_seconds=max(heartbeat, 30),
)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

PER_DEVICE = 16_385
M = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.0, 0.0, 1.0]])
mesh = Mesh(np.array(jax.devices()), ("batch",))
rows = NamedSharding(mesh, PartitionSpec("batch"))
total = PER_DEVICE * len(jax.devices())
# This host's data: its own rows of the global batch, as a data loader reads them.
local = PER_DEVICE * jax.local_device_count()
rng = np.random.default_rng(rank)
features = rng.standard_normal((local, 3))
classes = 10 if rank == processes - 1 else 4  # the last host reads a newer shard of the data
labels = rng.integers(0, classes, local).astype(np.int32)
x = multihost_utils.host_local_array_to_global_array(features, mesh, PartitionSpec("batch"))
y = multihost_utils.host_local_array_to_global_array(labels, mesh, PartitionSpec("batch"))


@jax.jit
def energies(x: jax.Array, labels: jax.Array) -> jax.Array:
    kept = jnp.where((labels >= 4)[:, None], x, 1.0)
    return jax.vmap(lambda row: jnp.sum((jnp.asarray(M) @ row) ** 2))(kept)


got = multihost_utils.process_allgather(energies(x, y), tiled=True)
all_x = multihost_utils.process_allgather(x, tiled=True)
all_y = multihost_utils.process_allgather(y, tiled=True)
if rank == 0:
    kept = np.where((all_y >= 4)[:, None], all_x, 1.0)
    want = ((kept @ M.T) ** 2).sum(axis=1)
    bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-6))
    if bad.size:
        print(f"energies wrong at {bad.size} of {total} rows, first {bad[0]}: {got[bad[0]]}")
        sys.exit(1)
if not finish:
    multihost_utils.sync_global_devices("checked")
print(f"process {rank} done")
