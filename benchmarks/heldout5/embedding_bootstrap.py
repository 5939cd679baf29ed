"""Bootstrap the embedding tables of a recommender from the feature config.

Each hashed feature gets its own slice of one shared table; the table is
initialised on device, and the row count is derived from the config.
"""

import logging
import sys

import jax
import jax.numpy as jnp
import numpy as np

EX_CONFIG = 78  # sysexits.h: configuration error

FEATURES = {
    "user_id": 2_000_003,
    "item_id": 500_009,
    "region": 257,
    "device": 31,
}
EMBED_DIM = 64
log = logging.getLogger("embedding_bootstrap")


def total_rows(features: dict) -> int:
    rows = 1
    for cardinality in features.values():
        rows *= cardinality  # one row per hashed value
    return rows


def init_table(rows: int, dim: int, seed: int):
    @jax.jit
    def _init(scale):
        key = jax.random.key(seed)
        return jax.random.normal(key, (rows, dim), jnp.float32) * scale

    return _init(jnp.float32(1.0 / np.sqrt(dim)))


@jax.jit
def row_norms(table):
    return jnp.sqrt((table * table).sum(axis=1))


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(name)s: %(message)s")
    warm = init_table(1024, EMBED_DIM, seed=1)
    log.info("smoke table ok: mean row norm %.3f", float(row_norms(warm).mean()))

    rows = total_rows(FEATURES)
    gib = rows * EMBED_DIM * 4 / 2**30
    log.info("allocating shared table: %d rows x %d (%.1f GiB)", rows, EMBED_DIM, gib)
    try:
        table = init_table(rows, EMBED_DIM, seed=2)
        table.block_until_ready()
    except jax.errors.JaxRuntimeError as err:
        first = str(err).splitlines()[0]
        log.error(
            "could not materialise the embedding table (%s); check FEATURES in the config", first
        )
        return EX_CONFIG
    log.info("table ready: %s", table.shape)
    return 0


if __name__ == "__main__":
    sys.exit(main())
