"""A sharded evaluation of a discrete latent-factor model, 4 processes of 1 CPU device each.

Started once per process, as srun starts it: ``python prog.py RANK N PORT`` (RANK from 0, N
processes, PORT the coordinator's port on 127.0.0.1, served by process 0).

Each example has observations over 4 sensors x 6 categories and a conditional table over 5
latent factors of 9 levels each. ``evaluate_loglik`` marginalises the categories
(``sum(obs[..., None x5] * table, axis=2)``), takes the log-likelihood of every latent
configuration, and averages the best configuration's score over the batch, which is sharded
over a ("batch",) mesh of all 4 devices (2 examples per device).

What goes wrong: jax-ml/jax#39257, a regression in jaxlib 0.10.2. XLA:CPU runs the rank-8
broadcast-multiply-reduce as a YNNPACK fusion that dies with SIGSEGV (jaxlib 0.10.1 computes
it). Every process runs the same partitioned module on its own shard, so all 4 processes
crash the same way while executing jit(evaluate_loglik); none of them prints a score.
Process 0, the chief, reaches the eval a few seconds after the others (it registers the run
first), so that the others' crash is their own and not the coordination service's abort
when the chief's process dies. A process crash on every process; culprit
jit(evaluate_loglik).
"""

import functools
import os
import sys
import time

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

SENSORS, CATEGORIES, FACTORS, LEVELS = 4, 6, 5, 9
EXAMPLES_PER_DEVICE = 2
TINY = float(np.finfo(np.float32).eps) / 512


@functools.lru_cache(maxsize=4)
def load_examples(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Examples start..stop of the validation set, made from their index (no files here)."""
    obs, tables = [], []
    for example in range(start, stop):
        rng = np.random.default_rng(example)
        counts = rng.integers(1, 5, (SENSORS, CATEGORIES)).astype(np.float32)
        obs.append(counts / counts.sum(axis=1, keepdims=True))
        shape = (SENSORS, CATEGORIES) + (LEVELS,) * FACTORS
        tables.append(rng.uniform(0.05, 1.0, shape).astype(np.float32))
    return np.stack(obs), np.stack(tables)


@jax.jit
def evaluate_loglik(obs: jax.Array, table: jax.Array) -> tuple[jax.Array, jax.Array]:
    lik = jnp.sum(obs[..., None, None, None, None, None] * table, axis=2)
    loglik = jnp.log(jnp.maximum(lik, TINY)).sum(axis=1)
    best = loglik.reshape(loglik.shape[0], -1).max(axis=1)
    return best.mean(), best


def main() -> int:
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    by_example = NamedSharding(mesh, PartitionSpec("batch"))
    n_examples = EXAMPLES_PER_DEVICE * len(jax.devices())
    obs_shape = (n_examples, SENSORS, CATEGORIES)
    table_shape = (n_examples, SENSORS, CATEGORIES) + (LEVELS,) * FACTORS

    def rows(index: tuple[slice, ...]) -> tuple[int, int]:
        return index[0].start or 0, index[0].stop or n_examples

    obs = jax.make_array_from_callback(obs_shape, by_example, lambda i: load_examples(*rows(i))[0])
    table = jax.make_array_from_callback(
        table_shape, by_example, lambda i: load_examples(*rows(i))[1]
    )
    mine = EXAMPLES_PER_DEVICE * DEVICES_PER_PROCESS
    print(f"process {RANK}/{PROCESSES}: loaded {mine} of {n_examples} examples", flush=True)
    if RANK == 0:
        # The chief first records the run's metadata with the experiment tracker; the sleep
        # stands in for that upload, which takes a few seconds on the real cluster.
        time.sleep(5)
        print(f"chief: eval of {n_examples} examples registered", flush=True)

    mean_best, best = evaluate_loglik(obs, table)
    scores = multihost_utils.process_allgather(best, tiled=True)
    if RANK == 0:
        print(f"validation: mean best log-likelihood {float(mean_best):.4f}", flush=True)
        print(f"per example: {np.round(scores, 3).tolist()}", flush=True)
    print(f"process {RANK}: eval done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
