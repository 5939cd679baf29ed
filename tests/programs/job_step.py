"""One process of a data-parallel ``jax.distributed`` job on localhost CPU, started as a
cluster starts it (one command per process): N processes of M devices each, the batch
sharded over all N x M devices, the gradient summed across processes by gloo.

``python job_step.py RANK N PORT MODE [M]``, or ``python job_step.py launch N MODE`` to start
all N processes on this machine as a launcher does (it ends the others once one has failed,
and exits with that one's status). MODE says what goes wrong:

- ``crash-K``: process K's environment differs from the others' (a host whose XLA_FLAGS carry
  ``--xla_disable_hlo_passes=copy-insertion``); without copy insertion, buffer assignment finds
  two constants of the step's ``jax.random.split`` sharing a buffer and aborts on a CHECK
  (buffer_assignment_util.cc: const_instr == nullptr; see compile_options_crash.py). The other
  processes compiled the step, and block in its all-reduce until the job's coordination
  service ends them.
- ``crash-all``: every process has that environment; each aborts the same way. With
  ``JOB_STEP_READY`` (a folder), process 0 compiles the step only once the others are
  compiling it: its crash ends the job's coordination service, and with it any process that
  had not crashed yet.
- ``wrong``: jax#39103 inside the sharded step (see sharded_wrong.py): every device's shard of
  a float64 row-norm holds 16385 rows, and XLA's YNNPACK fusion in jaxlib 0.10.2 on CPU reads
  another row for the element just past its output's first 128 KiB. Process 0 checks the
  gathered result against numpy and exits 1; the others finish.
- ``later-wrong``: the same bug in a jit each process runs on its own device, twice: on rows
  that are all alike (the row read by mistake holds the same values: right), then on rows
  that differ. Process 0 checks the second call against numpy and exits 1: only a later
  call's inputs show the wrong value. The others wait for it at a barrier until the job ends
  them.
- ``ok``: no failure.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def launch(processes: int, mode: str) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    argv = [sys.executable, __file__]
    ranks = [
        subprocess.Popen([*argv, str(r), str(processes), port, mode]) for r in range(processes)
    ]
    failed = 0
    while not failed and any(r.poll() is None for r in ranks):
        pid, status = os.wait()
        for r in ranks:
            if r.pid == pid:
                r.returncode = os.waitstatus_to_exitcode(status)
                failed = r.returncode
    for r in ranks:
        if r.poll() is None:
            r.send_signal(signal.SIGTERM)
            r.wait()
    return 128 - failed if failed < 0 else failed


if sys.argv[1] == "launch":
    sys.exit(launch(int(sys.argv[2]), sys.argv[3]))

rank, processes, port, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
devices = int(sys.argv[5]) if len(sys.argv) > 5 else 2
flags = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}"
if mode == "crash-all" or mode == f"crash-{rank}":
    flags += " --xla_disable_hlo_passes=copy-insertion"
os.environ["XLA_FLAGS"] = flags

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts it)

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_enable_x64", mode in ("wrong", "later-wrong"))
# How soon the job's coordination service gives up on a silent process (jax's default: 100 s;
# JOB_STEP_HEARTBEAT shortens it, and the wait at shutdown with it).
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

mesh = Mesh(np.array(jax.devices()), ("batch",))
rows = NamedSharding(mesh, PartitionSpec("batch"))
everywhere = NamedSharding(mesh, PartitionSpec())


def global_batch(shape: tuple[int, ...], dtype: object, fill: object) -> jax.Array:
    """The global batch, each process making only its own devices' rows."""
    return jax.make_array_from_callback(shape, rows, lambda index: fill(index, shape, dtype))


def features(index: tuple[slice, ...], shape: tuple[int, ...], dtype: object) -> np.ndarray:
    start = index[0].start or 0
    stop = index[0].stop if index[0].stop is not None else shape[0]
    x = np.zeros((stop - start, *shape[1:]), dtype=dtype)
    x[:, 0] = np.arange(start, stop)
    return x


if mode == "wrong":
    per_device = 16_385
    x = global_batch((per_device * len(jax.devices()), 3), np.float64, features)
    matrix = jnp.eye(3, dtype=jnp.float64)

    @jax.jit
    def row_energy(x: jax.Array) -> jax.Array:
        return jax.vmap(lambda row: jnp.sum((matrix @ row) ** 2))(x)

    energy = multihost_utils.process_allgather(row_energy(x), tiled=True)
    expected = np.arange(len(energy), dtype=np.float64) ** 2
    if rank == 0:
        bad = np.flatnonzero(energy != expected)
        if bad.size:
            print(f"row energy wrong at {bad.size} rows, first {bad[0]}: {energy[bad[0]]}")
            sys.exit(1)
    multihost_utils.sync_global_devices("checked")
    print(f"process {rank} done")
    sys.exit(0)

if mode == "later-wrong":
    rows = 16_385  # one float64 row past 128 KiB of output: where the fusion reads wrongly
    matrix = jnp.eye(3, dtype=jnp.float64)

    @jax.jit
    def local_energy(x: jax.Array) -> jax.Array:
        return jax.vmap(lambda row: jnp.sum((matrix @ row) ** 2))(x)

    alike = np.ones((rows, 3))
    differ = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3)
    for call, x in enumerate((alike, differ)):
        energy = np.asarray(local_energy(jax.device_put(x, jax.local_devices()[0])))
        bad = np.flatnonzero(energy != np.sum(x**2, axis=1))
        if rank == 0 and bad.size:
            print(f"call {call}: energy wrong at {bad.size} rows, first {bad[0]}: {energy[bad[0]]}")
            sys.exit(1)
    multihost_utils.sync_global_devices("checked")
    print(f"process {rank} done")
    sys.exit(0)

width = 64
params = jax.device_put(jnp.full((width, width), 0.01, jnp.float32), everywhere)
batch = global_batch((8 * len(jax.devices()), width), np.float32, features)


@jax.jit
def train_step(params: jax.Array, batch: jax.Array, key: jax.Array) -> jax.Array:
    def loss(p: jax.Array) -> jax.Array:
        drop, noise = jax.random.split(key)
        keep = jax.random.bernoulli(drop, 0.9, batch.shape)
        h = jnp.tanh(jnp.where(keep, batch, 0.0) @ p)
        return jnp.mean(h**2) + 1e-3 * jnp.mean(jax.random.normal(noise, (4,)))

    return params - 0.1 * jax.grad(loss)(params)


keys = [jax.random.key(step) for step in range(3)]
ready = os.environ.get("JOB_STEP_READY")
if mode == "crash-all" and ready:
    # Process 0 hosts the job's coordination service, and its crash ends every process
    # still running: it compiles the step only once every other process is compiling it,
    # so that each one crashes by itself (each says so in a file of JOB_STEP_READY).
    here = Path(ready)
    if rank:
        (here / f"{rank}.compiling").touch()
    else:
        while not all((here / f"{r}.compiling").exists() for r in range(1, processes)):
            time.sleep(0.05)
for step in range(3):
    params = train_step(params, batch, keys[step])
print(f"process {rank}: loss step done, {float(jnp.sum(params)):.4f}")
multihost_utils.sync_global_devices("done")
print(f"process {rank} done")
