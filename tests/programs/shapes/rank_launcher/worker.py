"""One rank of a data-parallel-style job, started by launch.py (`python launch.py --nproc 2
worker.py --steps 5`); each rank trains on its own shard, with no collectives.

What XLA does wrong: rank 1 is the job's numerics reference and runs XLA unoptimised: it
appends `--xla_disable_all_hlo_passes=true` to XLA_FLAGS before jax starts. Its train step
draws a dropout mask (jax.random.bernoulli), and XLA's CPU backend aborts while emitting the
constants of that random-number computation:

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

Rank 0 compiles the same train_step with the default passes and finishes. Every line the
ranks print, XLA's CHECK line included, reaches the terminal with a `[rankN] ` prefix.

Bare run: rank 1 dies on SIGABRT (-6) while compiling jit(train_step); rank 0 exits 0; the
launcher prints `launch.py: rank 1 failed with exit code -6 (SIGABRT)` and exits 1.
Expected answer: compile crash, in rank 1's process; culprit jit(train_step) (module
jit_train_step, rank 1's copy: rank 0's compiles fine); the replay reproduces the crash.
"""

import argparse
import os

RANK = int(os.environ.get("RANK", "0"))
if RANK == 1:
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax  # noqa: E402  (the flag must be in XLA_FLAGS before jax starts XLA)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def loss(w, x, y, mask):
    hidden = jnp.tanh(x @ w["h"]) * mask / 0.9
    return jnp.mean((hidden @ w["o"] - y) ** 2)


@jax.jit
def train_step(w, x, y, key, step):
    # The key is split inside the step, so that all of the random-number work is in this
    # module (a jax.random.split outside would compile, and crash, a module of its own).
    mask = jax.random.bernoulli(jax.random.fold_in(key, step), 0.9, (x.shape[0], w["h"].shape[1]))
    value, grads = jax.value_and_grad(loss)(w, x, y, mask)
    return jax.tree.map(lambda p, g: p - 0.1 * g, w, grads), value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    steps = parser.parse_args().steps

    rng = np.random.default_rng(RANK)
    x = jnp.asarray(rng.standard_normal((64, 8)), jnp.float32)
    y = jnp.asarray(x[:, :1] * 2.0 - 1.0)
    w = {
        "h": jnp.asarray(rng.standard_normal((8, 32)) / np.sqrt(8), jnp.float32),
        "o": jnp.zeros((32, 1), jnp.float32),
    }
    print(f"rank {RANK}: training on {x.shape[0]} examples", flush=True)
    key = jax.random.key(RANK)
    for step in range(steps):
        w, value = train_step(w, x, y, key, step)
        print(f"rank {RANK}: step {step} loss {float(value):.4f}", flush=True)
    print(f"rank {RANK}: done", flush=True)


if __name__ == "__main__":
    main()
