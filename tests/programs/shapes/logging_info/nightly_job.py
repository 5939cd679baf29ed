"""A batch job that reports through Python's logging at INFO level, then fails inside XLA.

What XLA does wrong: after three steps that compile and run fine, the job builds a dense
pairwise table, `jnp.broadcast_to(x, (2**20, 2**20)) * 2` under jit: a 4 TiB float32
result. The jitted `pair_table` compiles; executing it, XLA's CPU runtime fails to
allocate the result (the mechanism of tests/programs/runtime_error.py):

    jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.

The job configures logging with `logging.basicConfig(level=logging.INFO)` and a format of
its own, so any record that jax's loggers emit at INFO or above reaches stderr as well;
its own lines are `INFO nightly: ...`. The job logs the failure with `log.error` and exits 1.
A tool run in front of it must leave those lines as they are, and add none.

Bare run: exit status 1.
Expected answer: runtime error; culprit jit(pair_table) (module jit_pair_table); the replay
reproduces the error.
"""

import logging
import sys

import jax
import jax.numpy as jnp
import numpy as np

log = logging.getLogger("nightly")

ROWS = 1 << 20


@jax.jit
def standardize(x):
    return (x - jnp.mean(x)) / jnp.std(x)


@jax.jit
def histogram(x):
    return jnp.histogram(x, bins=8, range=(-4.0, 4.0))[0]


@jax.jit
def pair_table(x):
    return jnp.broadcast_to(x, (ROWS, ROWS)) * 2


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    log.info("loading %d readings", ROWS)
    readings = jnp.asarray(np.random.default_rng(0).standard_normal(ROWS), jnp.float32)
    log.info("standardizing")
    z = standardize(readings)
    log.info("histogram: %s", np.asarray(histogram(z)).tolist())
    log.info("building the pair table")
    try:
        table = pair_table(z[:1])
        log.info("pair table ready: %s", table.shape)
    except jax.errors.JaxRuntimeError as error:
        log.error("pair table failed: %s", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
