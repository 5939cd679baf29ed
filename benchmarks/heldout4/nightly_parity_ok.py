"""Nightly numerics report: compares jitted kernels with numpy and logs the outcome.

Everything passes. The log is written the way the team's dashboards grep it, so a clean
run still prints words like "ERROR", "mismatch", "FAILED", "Traceback" and
"RESOURCE_EXHAUSTED" (as counters at zero, and as a column header), and the report is
written to stderr. The process exits 0: there is no failure at all.
"""

import logging
import sys

import jax
import jax.numpy as jnp
import numpy as np

log = logging.getLogger("nightly-numerics")


@jax.jit
def softmax_xent(logits, labels):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


@jax.jit
def layer_norm(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


def np_xent(logits, labels):
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -np.mean(logp[np.arange(len(labels)), labels])


def np_layer_norm(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


def main():
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(levelname)-7s %(name)s | %(message)s"
    )
    rng = np.random.default_rng(0)
    log.info("%-14s %8s %10s %8s %s", "kernel", "ERROR", "mismatch", "FAILED", "max_abs_diff")
    mismatches = 0
    for name, got, want in (
        ("softmax_xent", lambda a: softmax_xent(*a), lambda a: np_xent(*a)),
        ("layer_norm", lambda a: layer_norm(a[0]), lambda a: np_layer_norm(a[0])),
    ):
        args = (rng.normal(size=(512, 32)).astype(np.float32), rng.integers(0, 32, 512))
        diff = float(np.max(np.abs(np.asarray(got(args)) - want(args))))
        bad = int(diff > 1e-4)
        mismatches += bad
        log.info("%-14s %8d %10d %8d %.2e", name, 0, bad, bad, diff)
    log.info(
        "summary: ERROR=0 mismatch=%d FAILED=%d Traceback=0 RESOURCE_EXHAUSTED=0",
        mismatches,
        mismatches,
    )
    if mismatches:
        log.error("numerics mismatch in %d kernel(s)", mismatches)
        sys.exit(1)
    print("nightly numerics: all kernels within tolerance", file=sys.stderr)


if __name__ == "__main__":
    main()
