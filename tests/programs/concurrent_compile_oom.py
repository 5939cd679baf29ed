"""Two threads compile the same function at once on differently shaped inputs; one module
runs out of memory.

``python concurrent_compile_oom.py`` evaluates a pairwise-affinity function on two batches
from a pool of two threads. Both threads wait on a barrier, then each calls
``jax.jit(affinity)`` on its batch: two modules named jit_affinity are compiled at the same
time, one for 256 points, one for 2**21 points. The small one runs. The large one's result,
a 2**21 x 2**21 float32 matrix (16 TiB), cannot be allocated whatever the machine:

    RESOURCE_EXHAUSTED: Out of memory allocating 17592186044416 bytes.

Which of the two compilations XLA numbers first depends on the threads' interleaving.

Expected answer: runtime error (out of memory) in jit(affinity), the module compiled for
f32[2097152]; its recorded input is that batch; the replay reproduces the error.
Exit status: 1 (jax.errors.JaxRuntimeError).
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

SIZES = (256, 2**21)
start = threading.Barrier(len(SIZES))


def affinity(x):
    return jnp.exp(-((x[:, None] - x[None, :]) ** 2))


def evaluate(size: int) -> float:
    batch = np.random.default_rng(size).standard_normal(size).astype(np.float32)
    start.wait()  # both compile at once
    return float(jax.jit(affinity)(batch)[0, 0])


with ThreadPoolExecutor(max_workers=len(SIZES), thread_name_prefix="eval") as pool:
    futures = {size: pool.submit(evaluate, size) for size in SIZES}
    for size, future in futures.items():
        print(f"batch of {size}: first affinity {future.result():.3f}", flush=True)
