# Copy of benchmarks/heldout5/gradnorm_monitor.py, test data of collecting/own_callback_test.py.
"""Linear regression with a gradient-norm monitor streamed from inside the jitted step.

The monitor keeps a log-scale histogram of gradient norms per step (for the
training dashboard) through jax.debug.callback.
"""

import math
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np

BUCKET_EDGES = [10.0**e for e in range(-6, 3)]  # 1e-6 .. 1e2
HISTOGRAM: Counter = Counter()


def _edge_index(value: float) -> int:
    for i, edge in enumerate(BUCKET_EDGES):
        if value < edge:
            return i
    raise ValueError(
        f"gradient norm {value:.3g} is beyond the last histogram edge {BUCKET_EDGES[-1]:g}"
    )


def _bucket_label(value: float) -> str:
    i = _edge_index(value)
    lo = BUCKET_EDGES[i - 1] if i else 0.0
    return f"[{lo:g}, {BUCKET_EDGES[i]:g})"


def record_grad_norm(step, norm):
    norm = float(norm)
    if math.isfinite(norm):
        HISTOGRAM[_bucket_label(norm)] += 1
    if int(step) % 5 == 0:
        print(f"  monitor: step {int(step)} |g|={norm:.4g}")


@jax.jit
def step_fn(w, x, y, step, lr):
    def loss(w):
        return jnp.mean((x @ w - y) ** 2)

    value, g = jax.value_and_grad(loss)(w)
    jax.debug.callback(record_grad_norm, step, jnp.linalg.norm(g))
    return w - lr * g, value


def main():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(1024, 16)).astype(np.float32)
    w_true = rng.normal(size=16).astype(np.float32)
    y = x @ w_true + 0.01 * rng.normal(size=1024).astype(np.float32)
    # A learning-rate warm-up that overshoots: the schedule's peak is too high for this data.
    schedule = np.concatenate([np.linspace(0.01, 0.2, 10), np.full(30, 1.6)]).astype(np.float32)
    w = jnp.zeros(16, jnp.float32)
    for step, lr in enumerate(schedule):
        w, value = step_fn(w, x, y, step, lr)
        value = float(value)
        if step % 5 == 0:
            print(f"step {step:3d} lr={lr:.3f} mse={value:.5f}")
    print("histogram:", dict(HISTOGRAM))


if __name__ == "__main__":
    main()
