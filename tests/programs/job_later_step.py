"""A ``jax.distributed`` job whose data goes wrong only at a later step, on one host.

``python job_later_step.py RANK N PORT``: process RANK of N on localhost CPU, 2 devices each,
started as a cluster starts them (one command per process). Each step, each process reads
its own part of the batch (feature rows, a label per row) and runs the step of
job_data_wrong.py: it keeps a row's features where its label is a new class (4 and up) and
puts a constant row in their place otherwise, then sums ``(M @ row) ** 2`` per row
(jax-ml/jax#39103: jaxlib 0.10.2 on CPU fuses the mat-vec, the square and the sum into one
YNNPACK fusion whose element just past its output's first 128 KiB holds another row's
value, visible only where the rows differ). Until the last step every host reads old
classes only (0 to 3), so every row is the constant and every step is right; at the last
step (STEPS) the last host reads a newer shard of the data, with new classes, and its
devices' results are wrong. The step's first call's inputs, and inputs generated for a
replay, make every row the constant: only the last step's inputs show it.

Each step, process 0 gathers the result, the rows and the labels and checks the step
against numpy; it exits 1 at the step where they disagree. Every process runs the same
steps (the gathers are collectives), and the others end when their steps are done.
"""

import os
import sys

rank, processes, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
)

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts it)

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_enable_x64", True)
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=processes, process_id=rank)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, PartitionSpec  # noqa: E402

STEPS = 4
PER_DEVICE = 16_385
M = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.0, 0.0, 1.0]])
mesh = Mesh(np.array(jax.devices()), ("batch",))
total = PER_DEVICE * len(jax.devices())
local = PER_DEVICE * jax.local_device_count()


@jax.jit
def energies(x: jax.Array, labels: jax.Array) -> jax.Array:
    kept = jnp.where((labels >= 4)[:, None], x, 1.0)
    return jax.vmap(lambda row: jnp.sum((jnp.asarray(M) @ row) ** 2))(kept)


for step in range(1, STEPS + 1):
    # This host's data of this step: its own rows of the global batch.
    rng = np.random.default_rng(100 * step + rank)
    features = rng.standard_normal((local, 3))
    newer = step == STEPS and rank == processes - 1  # the last host's newer shard, at last
    labels = rng.integers(0, 10 if newer else 4, local).astype(np.int32)
    x = multihost_utils.host_local_array_to_global_array(features, mesh, PartitionSpec("batch"))
    y = multihost_utils.host_local_array_to_global_array(labels, mesh, PartitionSpec("batch"))
    got = multihost_utils.process_allgather(energies(x, y), tiled=True)
    all_x = multihost_utils.process_allgather(x, tiled=True)
    all_y = multihost_utils.process_allgather(y, tiled=True)
    if rank == 0:
        kept = np.where((all_y >= 4)[:, None], all_x, 1.0)
        want = ((kept @ M.T) ** 2).sum(axis=1)
        bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-6))
        if bad.size:
            print(
                f"energies wrong at step {step}: {bad.size} of {total} rows, "
                f"first {bad[0]}: {got[bad[0]]}",
                flush=True,
            )
            sys.exit(1)
print(f"process {rank} done", flush=True)
