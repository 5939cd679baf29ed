"""A multi-task job: a shared encoder trained data-parallel by 3 processes of 1 CPU device
each, then every host scores its own task's held-out set locally. Only process 2 crashes.

Started once per process, as srun starts it: ``python prog.py RANK N PORT`` (RANK from 0, N
processes, PORT the coordinator's port on 127.0.0.1, served by process 0).

Training: ``encoder_step`` runs on a ("data",) mesh of all 3 devices, the batch sharded and
the gradient averaged across the processes over gloo; 30 steps, all of them fine. Then each
host takes its replica of the encoder and scores the task it owns (``TASKS[rank]``) on its
local device with ``score_task``: the task head's softmax over the task's categories per
sensor, marginalised against the task's table over 5 latent factors of 9 levels
(``sum(probs[..., None x5] * table, axis=2)``). The per-task scores are then gathered.

What goes wrong: jax-ml/jax#39257, a regression in jaxlib 0.10.2: XLA:CPU runs that rank-8
broadcast-multiply-reduce as a YNNPACK fusion that dies with SIGSEGV for some category
counts (here 6, the "terrain" task of process 2) and not others (4 and 8, the tasks of
processes 0 and 1). Process 2 crashes while executing jit(score_task); processes 0 and 1
have scored their tasks and fail in the gather, a collateral error (gloo reports the
closed connection, or the coordination service ends them when process 2's heartbeat stops).
A process crash on process 2 only; culprit jit(score_task).
"""

import os
import sys

RANK, PROCESSES, PORT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
DEVICES_PER_PROCESS = 1
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={DEVICES_PER_PROCESS}"
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

INPUTS, HIDDEN, SENSORS, FACTORS, LEVELS = 16, 32, 4, 5, 9
STEPS, PER_DEVICE_BATCH, EVAL_EXAMPLES = 30, 32, 4
TASKS = [("weather", 4), ("traffic", 8), ("terrain", 6)]  # (name, categories), one per host


def batch(step: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(step)
    x = rng.standard_normal((size, INPUTS)).astype(np.float32)
    return x, np.sin(x[:, : INPUTS // 2].sum(axis=1, keepdims=True)).astype(np.float32)


@jax.jit
def encoder_step(params: dict, x: jax.Array, y: jax.Array) -> tuple[dict, jax.Array]:
    def loss(p: dict) -> jax.Array:
        h = jnp.tanh(x @ p["enc"])
        return jnp.mean((h @ p["probe"] - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value


@jax.jit
def score_task(enc: jax.Array, head: jax.Array, x: jax.Array, table: jax.Array) -> jax.Array:
    h = jnp.tanh(x @ enc)
    probs = jax.nn.softmax((h @ head).reshape(x.shape[0], SENSORS, -1), axis=-1)
    lik = jnp.sum(probs[..., None, None, None, None, None] * table, axis=2)
    loglik = jnp.log(jnp.maximum(lik, 1e-9)).sum(axis=1)
    return loglik.reshape(x.shape[0], -1).max(axis=1).mean()


def main() -> int:
    mesh = Mesh(np.array(jax.devices()), ("data",))
    by_row = NamedSharding(mesh, PartitionSpec("data"))
    rng = np.random.default_rng(0)
    params = {
        "enc": rng.normal(0, INPUTS**-0.5, (INPUTS, HIDDEN)).astype(np.float32),
        "probe": rng.normal(0, HIDDEN**-0.5, (HIDDEN, 1)).astype(np.float32),
    }
    params = jax.device_put(params, NamedSharding(mesh, PartitionSpec()))
    size = PER_DEVICE_BATCH * len(jax.devices())
    for step in range(STEPS):
        x_np, y_np = batch(step, size)
        x = jax.make_array_from_callback(x_np.shape, by_row, lambda i, a=x_np: a[i])
        y = jax.make_array_from_callback(y_np.shape, by_row, lambda i, a=y_np: a[i])
        params, loss = encoder_step(params, x, y)
        if step % 10 == 9 and RANK == 0:
            print(f"step {step + 1}: loss {float(loss):.4f}", flush=True)

    name, categories = TASKS[RANK]
    task_rng = np.random.default_rng(100 + RANK)
    enc = np.asarray(params["enc"].addressable_data(0))
    head = task_rng.normal(0, HIDDEN**-0.5, (HIDDEN, SENSORS * categories)).astype(np.float32)
    x_eval = task_rng.standard_normal((EVAL_EXAMPLES, INPUTS)).astype(np.float32)
    shape = (EVAL_EXAMPLES, SENSORS, categories) + (LEVELS,) * FACTORS
    table = task_rng.uniform(0.05, 1.0, shape).astype(np.float32)
    print(f"process {RANK}: scoring task {name} ({categories} categories)", flush=True)
    score = float(score_task(enc, head, x_eval, table))
    print(f"process {RANK}: task {name} score {score:.4f}", flush=True)

    scores = multihost_utils.process_allgather(np.float32(score))
    if RANK == 0:
        for (task, _), value in zip(TASKS, scores, strict=True):
            print(f"eval {task}: {value:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
