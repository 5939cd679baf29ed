"""One process of a ``jax.distributed`` job on localhost CPU (gloo) in which process 0 finds a
wrong result and exits, and the others, already in the next step's all-reduce, lose their
connection to it.

``python wrong_then_lost_peer.py RANK N PORT [EXIT [CHECKER]]``: N processes of 2 CPU devices
each; CHECKER (default 0) is the process that checks.
Every process runs the step: jax#39103 (see sharded_wrong.py) inside a jit sharded over all
N x 2 devices (each device's shard holds 16385 float64 rows, and XLA's YNNPACK fusion in
jaxlib 0.10.2 reads another row for the element just past its output's first 128 KiB), then
the sum of its energies, an all-reduce across the processes through gloo. Process 0 checks
the gathered energies against numpy and exits 1; the others run the step's all-reduce
again. EXIT says how process 0 exits:

- ``at-once`` (the default): ``os._exit(1)``, as a job's script does that must not wait for
  the others at jax.distributed's shutdown barrier. Gloo finds the connection to process 0
  closed (``Gloo all-reduce failed: ... Connection closed by peer``) in the others, and the
  coordination service (process 0's) gone: the JAX client aborts each of them.
- ``sys-exit``: ``sys.exit(1)``; process 0 waits at the shutdown barrier for the others,
  which wait for it in the all-reduce (its gloo connections stay open while it waits),
  until the barrier times out and the job's coordination service aborts every process,
  process 0 included (``client.h:80] Terminating process ... Shutdown barrier has
  failed``); a survivor may meet gloo's lost connection first.

Either way the job's failure is process 0's wrong result, and only that.

With another CHECKER under ``sys-exit``, the checking process waits at the shutdown barrier
while process 0, which runs the coordination service, waits for it in the all-reduce; the
barrier times out and the service's error polling aborts the checker
(``client.h:80] Terminating process ...``): its output alone reads as a process the job took
down, and only its own record says it had called sys.exit(1) first.
"""

import os
import sys

rank, processes, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
at_once = (sys.argv[4] if len(sys.argv) > 4 else "at-once") == "at-once"
checker = int(sys.argv[5]) if len(sys.argv) > 5 else 0
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


def features(index: tuple[slice, ...], shape: tuple[int, ...]) -> np.ndarray:
    start = index[0].start or 0
    stop = index[0].stop if index[0].stop is not None else shape[0]
    x = np.zeros((stop - start, 3), dtype=np.float64)
    x[:, 0] = np.arange(start, stop)  # row k is (k, 0, 0): its right energy is k**2
    return x


@jax.jit
def row_energy(x: jax.Array) -> jax.Array:
    return jax.vmap(lambda row: jnp.sum((jnp.eye(3, dtype=x.dtype) @ row) ** 2))(x)


@jax.jit
def total(energy: jax.Array) -> jax.Array:
    return jnp.sum(energy)  # an all-reduce across the processes


def main() -> int:
    mesh = Mesh(np.array(jax.devices()), ("rows",))
    shape = (16_385 * len(jax.devices()), 3)
    rows = NamedSharding(mesh, PartitionSpec("rows"))
    x = jax.make_array_from_callback(shape, rows, lambda index: features(index, shape))
    energy = row_energy(x)
    print(f"process {rank}: total energy {float(total(energy)):.1f}", flush=True)
    gathered = multihost_utils.process_allgather(energy, tiled=True)
    if rank == checker:
        expected = np.arange(len(gathered), dtype=np.float64) ** 2
        bad = np.flatnonzero(gathered != expected)
        if bad.size:
            # Flushed: under sys-exit the service may abort the process while Python is still
            # in jax's shutdown at exit, before it flushes what a pipe buffered.
            print(f"row energy wrong at {bad.size} rows, first {bad[0]}: {gathered[bad[0]]}",
                  flush=True)  # fmt: skip
            return 1
    print(f"process {rank}: next step, total {float(total(row_energy(x))):.1f}", flush=True)
    print(f"process {rank} done")
    return 0


status = main()
if status and at_once:
    sys.stdout.flush()
    os._exit(status)
sys.exit(status)
