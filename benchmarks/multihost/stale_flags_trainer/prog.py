"""A data-parallel MLP trainer, 3 processes of 2 CPU devices each, one host misconfigured.

Started once per process, as srun starts it: ``python prog.py RANK N PORT`` (RANK from 0, N
processes, PORT the coordinator's port on 127.0.0.1, served by process 0).

The global batch is sharded over a ("data",) mesh of all 6 devices, the parameters are
replicated, and ``train_step`` (dropout keys from ``jax.random.split``) averages the
gradient across the mesh, an all-reduce over gloo between the processes.

What goes wrong: node 1's environment module still carries a debugging flag,
``--xla_disable_hlo_passes=copy-insertion`` (``NODE_XLA_FLAGS`` below stands in for it,
since every process here runs on one machine). Without copy insertion, XLA:CPU's buffer
assignment finds two constants of the step's threefry split sharing a buffer and aborts on a
CHECK (buffer_assignment_util.cc: const_instr == nullptr) while compiling jit(train_step):
process 1 dies on SIGABRT. Processes 0 and 2 compile the step and wait in its all-reduce for
process 1 until the job's coordination service reports the missing task and terminates them
(that takes up to the heartbeat timeout, 30-100 s). Culprit: jit(train_step), a compile crash
on process 1 only.
"""

import os
import sys
import time

RANK, PROCESSES, PORT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
DEVICES_PER_PROCESS = 2
NODE_XLA_FLAGS = {1: "--xla_disable_hlo_passes=copy-insertion"}
os.environ["XLA_FLAGS"] = " ".join(
    part
    for part in (
        os.environ.get("XLA_FLAGS", ""),
        NODE_XLA_FLAGS.get(RANK, ""),
        f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS}",
    )
    if part
)

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts it)

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{PORT}", num_processes=PROCESSES, process_id=RANK
)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

FEATURES, HIDDEN, CLASSES = 32, 64, 10
PER_DEVICE_BATCH = 16
STEPS = 20
LEARNING_RATE = 0.05
DROPOUT = 0.1


def init_params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.normal(0.0, FEATURES**-0.5, (FEATURES, HIDDEN)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": rng.normal(0.0, HIDDEN**-0.5, (HIDDEN, CLASSES)).astype(np.float32),
        "b2": np.zeros(CLASSES, np.float32),
    }


def synthetic_batch(step: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The global batch of a step; each process keeps only its own devices' rows."""
    rng = np.random.default_rng(1_000 + step)
    x = rng.standard_normal((size, FEATURES)).astype(np.float32)
    y = (x[:, :CLASSES].argmax(axis=1)).astype(np.int32)
    return x, y


def loss_fn(params: dict, x: jax.Array, y: jax.Array, key: jax.Array) -> jax.Array:
    drop1, drop2 = jax.random.split(key)
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    h = jnp.where(jax.random.bernoulli(drop1, 1.0 - DROPOUT, h.shape), h / (1.0 - DROPOUT), 0.0)
    logits = h @ params["w2"] + params["b2"]
    logits = logits + 1e-3 * jax.random.normal(drop2, logits.shape)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params: dict, x: jax.Array, y: jax.Array, key: jax.Array) -> tuple:
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, key)
    params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return params, loss


def main() -> int:
    mesh = Mesh(np.array(jax.devices()), ("data",))
    by_row = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())
    global_batch = PER_DEVICE_BATCH * len(jax.devices())
    params = jax.device_put(init_params(0), replicated)
    print(f"process {RANK}: {len(jax.local_devices())} local devices, batch {global_batch}")
    started = time.time()
    for step in range(STEPS):
        x_np, y_np = synthetic_batch(step, global_batch)
        x = jax.make_array_from_callback(x_np.shape, by_row, lambda i, a=x_np: a[i])
        y = jax.make_array_from_callback(y_np.shape, by_row, lambda i, a=y_np: a[i])
        params, loss = train_step(params, x, y, jax.random.key(step))
        if step % 5 == 0 and RANK == 0:
            print(f"step {step}: loss {float(loss):.4f} ({time.time() - started:.1f}s)", flush=True)
    multihost_utils.sync_global_devices("training done")
    print(f"process {RANK}: trained {STEPS} steps, final loss {float(loss):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
