"""A feature ETL job that configures logging with dictConfig, then runs out of memory in XLA.

`python feature_etl.py` builds similarity features for a product catalogue. It imports jax
at the top and warms up its jitted normalization on a sample before anything else (its
first jitted call: jax starts its CPU backend here, before logging is configured), then
configures logging with `logging.config.dictConfig`: one StreamHandler on stderr with the
format `%(name)s [%(levelname)s] %(message)s`, the job's `etl` logger at DEBUG and the root
logger at INFO. dictConfig's default `disable_existing_loggers=True` disables every logger
that existed before the call and is not named in the config: jax's own loggers among them,
so no jax record reaches the handler. The job logs its steps at INFO and DEBUG, prints a
summary line on stdout and a note on stderr, and warns with `warnings.warn` that some
prices are missing (a UserWarning, printed by the warnings module, not a log record).

What XLA does wrong: the job then builds the dense price-affinity matrix of all 2**20
products, `exp(-(p[:, None] - p[None, :]) ** 2 / bandwidth)` under jit: a 4 TiB float32
result. jit(price_affinity) compiles; executing it, XLA's CPU runtime fails to allocate the
result (the mechanism of tests/programs/runtime_error.py). jax dispatches the call
asynchronously, so the error comes out of the job's `block_until_ready()`:

    jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.

The job logs `etl [ERROR] price affinity failed: ...` and re-raises: Python prints the
traceback and exits 1. A tool run in front of the job must leave its log lines as they are
(the `name [LEVEL] message` lines on stderr) and add none.

Bare run: exit status 1.
Expected answer: runtime error; culprit jit(price_affinity) (module jit_price_affinity); the
replay reproduces the error.
"""

import logging
import logging.config
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

PRODUCTS = 1 << 20
BANDWIDTH = 25.0

LOGGING = {
    "version": 1,
    "formatters": {"plain": {"format": "%(name)s [%(levelname)s] %(message)s"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "stream": "ext://sys.stderr",
        }
    },
    "loggers": {"etl": {"level": "DEBUG"}},
    "root": {"level": "INFO", "handlers": ["console"]},
}

log = logging.getLogger("etl")


@jax.jit
def log_normalize(prices):
    logp = jnp.log1p(prices)
    return (logp - jnp.mean(logp)) / jnp.std(logp)


@jax.jit
def bucket_counts(z):
    return jnp.histogram(z, bins=6, range=(-3.0, 3.0))[0]


@jax.jit
def price_affinity(p, q):
    return jnp.exp(-((p[:, None] - q[None, :]) ** 2) / BANDWIDTH)


def load_prices(rng: np.random.Generator) -> np.ndarray:
    prices = rng.lognormal(mean=3.0, sigma=0.8, size=PRODUCTS).astype(np.float32)
    prices[rng.integers(0, PRODUCTS, 37)] = np.nan  # missing in the source feed
    return prices


def main() -> None:
    rng = np.random.default_rng(0)
    sample = log_normalize(jnp.asarray(rng.lognormal(3.0, 0.8, 1024), jnp.float32))
    sample.block_until_ready()

    logging.config.dictConfig(LOGGING)
    log.info("loading %d products", PRODUCTS)
    prices = load_prices(rng)
    missing = int(np.isnan(prices).sum())
    if missing:
        warnings.warn(f"{missing} products have no price; filling with the median", stacklevel=1)
        prices = np.where(np.isnan(prices), np.nanmedian(prices), prices)
    log.debug("price range %.2f .. %.2f", float(prices.min()), float(prices.max()))
    z = log_normalize(jnp.asarray(prices))
    log.info("buckets: %s", np.asarray(bucket_counts(z)).tolist())
    print(f"summary: {PRODUCTS} products, {missing} prices filled", flush=True)
    print("note: price affinity is computed densely", file=sys.stderr, flush=True)
    log.info("building the price affinity matrix")
    log.debug("affinity shape (%d, %d), bandwidth %.1f", PRODUCTS, PRODUCTS, BANDWIDTH)
    try:
        affinity = price_affinity(z, z)
        affinity.block_until_ready()
    except Exception as error:
        log.error("price affinity failed: %s", error)
        raise
    log.info("affinity ready: %s", affinity.shape)


if __name__ == "__main__":
    main()
