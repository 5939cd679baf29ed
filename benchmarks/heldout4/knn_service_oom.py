"""Nearest-neighbour refresh job, run under its own memory cap.

The job caps its own address space at 8 GiB (`resource.setrlimit(RLIMIT_AS)`) so that a
bad request cannot take down the shared inference host, then computes the full pairwise
distance matrix of 100k queries against 100k catalogue vectors in one jitted call: 40 GB
of float32, far over its own cap. XLA's CPU runtime fails to allocate it and the program
catches the error, logs its own message and exits 75 (EX_TEMPFAIL, so that the scheduler
retries it with smaller shards). Out of memory under the program's own cap: not XLA's bug.
"""

import logging
import os
import resource
import sys

import jax
import jax.numpy as jnp
import numpy as np

log = logging.getLogger("knn-refresh")
MEM_CAP = 8 << 30


@jax.jit
def nearest(queries, catalogue):
    d2 = (
        jnp.sum(queries * queries, axis=1)[:, None]
        + jnp.sum(catalogue * catalogue, axis=1)[None, :]
        - 2.0 * queries @ catalogue.T
    )
    return jnp.argmin(d2, axis=1), jnp.min(d2, axis=1)


def main():
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(name)s: %(message)s")
    jnp.zeros(1).block_until_ready()  # start the backend before the cap
    resource.setrlimit(resource.RLIMIT_AS, (MEM_CAP, resource.RLIM_INFINITY))
    log.info("address space capped at %d GiB (pid %d)", MEM_CAP >> 30, os.getpid())

    rng = np.random.default_rng(11)
    queries = rng.standard_normal((100_000, 16), dtype=np.float32)
    catalogue = rng.standard_normal((100_000, 16), dtype=np.float32)
    try:
        idx, dist = nearest(queries, catalogue)
        idx = np.asarray(idx)
    except jax.errors.JaxRuntimeError as e:
        msg = str(e)
        if "RESOURCE_EXHAUSTED" in msg or "Out of memory" in msg:
            log.error(
                "refresh does not fit in the job's memory cap; retry with --shards 8 (%s)",
                msg.splitlines()[0],
            )
            sys.exit(75)
        raise
    log.info("refreshed %d neighbours, mean distance %.3f", idx.size, float(np.mean(dist)))


if __name__ == "__main__":
    main()
