"""Click-through model with a class-balanced loss, trained on hourly click logs.

Each hourly batch's loss averages the positives and the negatives separately
(so rare clicks are not drowned out) and adds the two halves.
"""

import logging
import sys

import jax
import jax.numpy as jnp
import numpy as np

log = logging.getLogger("ctr")
N_FEATURES = 32
BATCH = 512
HOURS = 12


def hourly_batches(seed: int):
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=N_FEATURES).astype(np.float32)
    for hour in range(HOURS):
        x = rng.normal(size=(BATCH, N_FEATURES)).astype(np.float32)
        logits = x @ w_true - 4.0
        clicks = (rng.random(BATCH) < 1 / (1 + np.exp(-logits))).astype(np.float32)
        if hour == 7:
            # The 3 a.m. export of the click table: the join dropped every click.
            clicks[:] = 0.0
        yield hour, x, clicks


def balanced_loss(params, x, y):
    w, b = params
    logits = x @ w + b
    log_p = jax.nn.log_sigmoid(logits)
    log_not_p = jax.nn.log_sigmoid(-logits)
    n_pos = y.sum()
    n_neg = (1.0 - y).sum()
    pos_term = -(y * log_p).sum() / n_pos
    neg_term = -((1.0 - y) * log_not_p).sum() / n_neg
    return 0.5 * (pos_term + neg_term)


@jax.jit
def sgd_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(balanced_loss)(params, x, y)
    new_params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
    return new_params, loss


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    params = (jnp.zeros(N_FEATURES, jnp.float32), jnp.float32(0.0))
    for hour, x, y in hourly_batches(7):
        params, loss = sgd_step(params, jnp.asarray(x), jnp.asarray(y), 0.5)
        loss = float(loss)
        log.info("hour %02d  clicks=%3d  balanced_loss=%.4f", hour, int(y.sum()), loss)
        if not np.isfinite(loss):
            log.error("loss is %s at hour %02d; refusing to write a checkpoint", loss, hour)
            return 2
    w, b = params
    log.info("trained: |w|=%.3f b=%.3f", float(jnp.linalg.norm(w)), float(b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
