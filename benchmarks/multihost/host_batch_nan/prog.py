"""A data-parallel regression trainer over sensor rigs, 4 processes of 2 CPU devices each;
XLA's fast-math flags turn one host's missing readings into NaN losses.

Started once per process, as srun starts it: ``python prog.py RANK N PORT`` (RANK from 0, N
processes, PORT the coordinator's port on 127.0.0.1, served by process 0).

Every host reads the rig it is attached to: 64 readings per device a step, 12 sensors each,
and a target. A rig that drops out writes NaN for the sensors it lost; ``train_step`` imputes
them the usual way, ``jnp.where(jnp.isnan(x), 0.0, x)``, before a small MLP, under
``jax.jit`` over a global ("data",) mesh of all 8 devices (the batch sharded by rows, the
gradient averaged across the processes over gloo). ``train_step`` returns the new parameters
and each row's loss; after every step each process checks the losses of its own rows. The
program sets XLA's CPU fast-math flags for speed, as the trainer's launcher does on the real
cluster: ``--xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false``.

What goes wrong: with those flags XLA:CPU (jaxlib 0.10.2) compiles the step under LLVM's
no-NaNs assumption, so ``isnan(x)`` folds to false and the imputation is dropped from the
compiled module: a NaN reading reaches the MLP. XLA's help text says the flag controls
"whether we allow operations to produce NaNs"; what it does is assume none come in. Rigs 0,
2 and 3 never drop out and their rows' losses are right every step; rig 1 (process 1) loses
sensors 4 to 6 during the last step (step 16), so the losses of process 1's rows are NaN at
that step and its check exits 1 (SystemExit with a message). The other processes' rows are
finite at that step; they finish with exit 0. Without the two flags the same program trains
16 finite steps on every process. Culprit: jit(train_step), a wrong result on process 1's
rows only.
"""

import os
import sys

RANK, PROCESSES, PORT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
DEVICES_PER_PROCESS = 2
FAST_MATH = "--xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false"
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={DEVICES_PER_PROCESS} {FAST_MATH}"
)

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts it)

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{PORT}", num_processes=PROCESSES, process_id=RANK
)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

SENSORS, HIDDEN, STEPS, ROWS_PER_DEVICE = 12, 32, 16, 64
LEARNING_RATE = 0.05
# (rig, step, first sensor, last sensor): the rig's log of the readings it lost.
DROPOUTS = [(1, 16, 4, 6)]


def read_rig(rig: int, step: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """One step's readings of one rig (made from the rig and step: no files here)."""
    rng = np.random.default_rng(1000 * rig + step)
    x = rng.standard_normal((rows, SENSORS)).astype(np.float32)
    y = (np.tanh(x[:, :4].sum(axis=1)) + 0.1 * x[:, 8]).astype(np.float32)[:, None]
    for lost_rig, lost_step, first, last in DROPOUTS:
        if (lost_rig, lost_step) == (rig, step):
            x[::3, first - 1 : last] = np.nan
    return x, y


@jax.jit
def train_step(params: dict, x: jax.Array, y: jax.Array) -> tuple[dict, jax.Array]:
    x = jnp.where(jnp.isnan(x), 0.0, x)  # a lost reading counts as the sensor's mean, 0

    def row_losses(p: dict) -> jax.Array:
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return ((h @ p["w2"] - y) ** 2)[:, 0]

    def loss(p: dict) -> tuple[jax.Array, jax.Array]:
        rows = row_losses(p)
        return rows.mean(), rows

    (_, rows), grads = jax.value_and_grad(loss, has_aux=True)(params)
    new = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return new, rows


def main() -> int:
    mesh = Mesh(np.array(jax.devices()), ("data",))
    by_row = NamedSharding(mesh, PartitionSpec("data"))
    rows_per_rig = ROWS_PER_DEVICE * DEVICES_PER_PROCESS
    n_rows = rows_per_rig * PROCESSES
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.normal(0, SENSORS**-0.5, (SENSORS, HIDDEN)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": rng.normal(0, HIDDEN**-0.5, (HIDDEN, 1)).astype(np.float32),
    }
    params = jax.device_put(params, NamedSharding(mesh, PartitionSpec()))
    print(f"process {RANK}/{PROCESSES}: rig {RANK}, {rows_per_rig} rows a step", flush=True)

    start = RANK * rows_per_rig

    def local(index: tuple[slice, ...], a: np.ndarray) -> np.ndarray:
        """A device's rows of this host's readings, by the device's global row range."""
        return a[index[0].start - start : index[0].stop - start]

    for step in range(1, STEPS + 1):
        x_mine, y_mine = read_rig(RANK, step, rows_per_rig)
        x = jax.make_array_from_callback((n_rows, SENSORS), by_row, lambda i, a=x_mine: local(i, a))
        y = jax.make_array_from_callback((n_rows, 1), by_row, lambda i, a=y_mine: local(i, a))
        params, rows = train_step(params, x, y)
        mine = np.concatenate([np.asarray(s.data) for s in rows.addressable_shards])
        bad = np.flatnonzero(~np.isfinite(mine))
        if bad.size:
            sys.exit(
                f"TRAINING FAILED at step {step}: {bad.size} of {mine.size} losses of rig "
                f"{RANK} are not finite (row {start + bad[0]}: {mine[bad[0]]!r})"
            )
        if step % 4 == 0:
            print(f"process {RANK}: step {step}: my rows' mean loss {mine.mean():.4f}", flush=True)
    print(f"process {RANK}: {STEPS} steps done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
