"""Evaluation jobs run from a ThreadPoolExecutor; one worker thread's jit crashes XLA.

`python batch_eval.py` turns every HLO pass off (`--xla_disable_all_hlo_passes=true`,
appended to XLA_FLAGS before jax starts, to evaluate with unoptimised numerics), then
submits jobs to a pool of two threads: first `normalize` and `score`, which compile and run
fine, side by side, then `jitter`, which adds jax.random noise to the batch. The main thread
only waits on the futures; every jit is compiled and run in a worker thread.

What XLA does wrong: compiling jit(jitter_batch) in the worker thread, XLA's CPU backend
aborts while emitting the constants of the random-number computation (the bug of
tests/programs/compile_crash.py):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

SIGABRT kills the whole process: the main thread's `future.result()` never returns, and no
Python exception is raised anywhere.

Bare run: exit status -6 (SIGABRT; 134 from a shell).
Expected answer: compile crash; culprit jit(jitter_batch) (module jit_jitter_batch); the
replay reproduces the crash.
"""

import os
from concurrent.futures import ThreadPoolExecutor

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np


@jax.jit
def normalize_batch(x):
    return (x - jnp.mean(x, axis=0)) / (jnp.std(x, axis=0) + 1e-6)


@jax.jit
def score_batch(x, w):
    return jnp.tanh(x @ w).mean()


@jax.jit
def jitter_batch(x, key):
    return x + 0.01 * jax.random.normal(key, x.shape)


def normalize(batch):
    return f"column means {np.round(np.asarray(normalize_batch(batch)).mean(axis=0), 3).tolist()}"


def score(batch):
    w = jnp.linspace(-1.0, 1.0, batch.shape[1])
    return f"score {float(score_batch(batch, w)):.4f}"


def jitter(batch):
    return f"jittered mean {float(jitter_batch(batch, jax.random.key(3)).mean()):.4f}"


def main() -> None:
    batch = jnp.asarray(np.random.default_rng(0).standard_normal((256, 4)), jnp.float32)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="eval") as pool:
        first = {"normalize": pool.submit(normalize, batch), "score": pool.submit(score, batch)}
        for name, future in first.items():
            print(f"job {name}: {future.result()}", flush=True)
        print("job jitter: submitted", flush=True)
        print(f"job jitter: {pool.submit(jitter, batch).result()}", flush=True)


if __name__ == "__main__":
    main()
