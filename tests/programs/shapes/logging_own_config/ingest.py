"""An ingestion job that imports jax first, then sets up logging with its own handler.

`python ingest.py` imports jax at the top (as most modules do), and only in `main()` gives
the root logger a StreamHandler on stderr with its own formatter,
`[%(levelname)s] %(name)s | %(message)s`, at INFO. From then on, INFO records from jax's own
loggers reach stderr too (jax starts its backend lazily, after the handler is in place, and
logs `Unable to initialize backend 'tpu'` at INFO). The job logs its progress, prints a
summary line to stdout and a note to stderr, and warns with `warnings.warn` that the input
has duplicate timestamps (a UserWarning, printed by the warnings module, not a log record).

What XLA does wrong: the job then builds the dense co-occurrence table of 2**20 event codes,
`jnp.broadcast_to(codes, (2**20, 2**20)) * 2` under jit: a 4 TiB float32 result.
jit(cooccurrence) compiles; executing it, XLA's CPU runtime fails to allocate the result
(the mechanism of tests/programs/runtime_error.py):

    jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.

The error is not caught: Python prints the traceback and exits 1. A tool run in front of the
job must leave its log lines as they are (the `[LEVEL] name | message` lines on stderr) and
add none.

Bare run: exit status 1.
Expected answer: runtime error; culprit jit(cooccurrence) (module jit_cooccurrence); the
replay reproduces the error.
"""

import logging
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

log = logging.getLogger("ingest")

EVENTS = 1 << 20


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s | %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)


@jax.jit
def encode(timestamps):
    minutes = jnp.floor(timestamps / 60.0)
    return (minutes - jnp.min(minutes)).astype(jnp.float32)


@jax.jit
def counts(codes):
    return jnp.bincount(codes.astype(jnp.int32) % 16, length=16)


@jax.jit
def cooccurrence(codes):
    return jnp.broadcast_to(codes, (EVENTS, EVENTS)) * 2


def main() -> None:
    configure_logging()
    log.info("reading %d events", EVENTS)
    rng = np.random.default_rng(0)
    timestamps = np.sort(rng.integers(0, 86_400, EVENTS)).astype(np.float32)
    duplicates = EVENTS - np.unique(timestamps).size
    if duplicates:
        warnings.warn(f"{duplicates} events share a timestamp", stacklevel=1)
    log.info("encoding timestamps")
    codes = encode(jnp.asarray(timestamps))
    log.info("code counts: %s", np.asarray(counts(codes)).tolist())
    print(f"summary: {EVENTS} events, {int(codes.max()) + 1} distinct minutes", flush=True)
    print("note: the co-occurrence table is dense", file=sys.stderr, flush=True)
    log.info("building the co-occurrence table")
    table = cooccurrence(codes[:1])
    log.info("co-occurrence table ready: %s", table.shape)


if __name__ == "__main__":
    main()
