"""Fit river-gauge readings with a small linear model, masking the gauges that went offline.

What XLA does wrong here, and why: the program asks for fast math without NaN semantics
(`--xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false`, set in its own
XLA_FLAGS before jax starts), so XLA may assume no value is NaN and folds `jnp.isnan(y)` to
false. Offline gauges report NaN from step 24 on; the mask stops masking, and the loss, then
the weights, turn NaN at that step and stay NaN.

The answer a correct tool gives: a wrong result in jit(fit_step), reproduced by replaying
the step whose result first held a NaN (not the newest, whose inputs are already NaN), and
the program's own flags named as what makes it (without them the step agrees with its
references).
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false"
).strip()

import jax
import jax.numpy as jnp
import numpy as np

GAUGES, FEATURES, BATCH, STEPS, OFFLINE_FROM = 6, 8, 16, 40, 24

rng = np.random.default_rng(3)
features = rng.normal(size=(STEPS, BATCH, FEATURES)).astype(np.float32)
truth = rng.normal(size=(FEATURES, GAUGES)).astype(np.float32)
levels = features @ truth + 0.01 * rng.normal(size=(STEPS, BATCH, GAUGES)).astype(np.float32)
levels[OFFLINE_FROM:, :, 4:] = np.nan  # two gauges go offline


@jax.jit
def fit_step(weights, x, y):
    def masked_loss(w):
        seen = ~jnp.isnan(y)
        miss = jnp.where(seen, x @ w - jnp.where(seen, y, 0.0), 0.0)
        return jnp.sum(miss**2) / jnp.maximum(jnp.sum(seen), 1)

    loss, grad = jax.value_and_grad(masked_loss)(weights)
    return weights - 0.05 * grad, loss


weights = jnp.zeros((FEATURES, GAUGES), jnp.float32)
losses = []
for step in range(STEPS):
    weights, loss = fit_step(weights, jnp.asarray(features[step]), jnp.asarray(levels[step]))
    losses.append(float(loss))
print(f"loss at step 0: {losses[0]:.4f}, step {STEPS - 1}: {losses[-1]:.4f}")
bad = [i for i, value in enumerate(losses) if not np.isfinite(value)]
if bad:
    raise SystemExit(
        f"masked loss became NaN at step {bad[0]}: the mask should hide offline gauges"
    )
print("fit ok")
