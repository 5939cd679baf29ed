"""A small training loop whose own numpy check finds a wrong value computed by XLA.

The model is a linear regressor trained with a hand-written Adam (the way optax does it:
one jitted update, jitted loss and metrics, several ``jax.jit(lambda ...)`` helpers that
all dump as ``jit__lambda``, eager jnp calls that compile helper modules). Every few steps
it computes per-example feature energies for its data statistics with
``vmap(lambda row: sum((P @ row) ** 2))``: under jit on CPU, jaxlib 0.10.2 fuses that into
a YNNPACK fusion that reads another row for the element just past the first 128 KiB of the
output (jax#39103, the bug of tests/programs/wrong_result.py). The program compares the
energies with numpy once, after the first epoch, logs the mismatch, trains on (more
modules compile and run after the bad one), prints an unrelated last line and exits 1.

Exit status: 1 when the energies differ from numpy (jaxlib 0.10.2 on CPU), 0 otherwise.
"""

import sys
import time

import jax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

ROWS = 16_385  # one float64 row past 128 KiB of output: where the fusion reads wrongly
FEATURES = 3


def adam_update(params, grads, state, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    mu, nu, count = state
    count = count + 1
    mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
    nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
    mu_hat = jax.tree.map(lambda m: m / (1 - b1**count), mu)
    nu_hat = jax.tree.map(lambda v: v / (1 - b2**count), nu)
    params = jax.tree.map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), params, mu_hat, nu_hat)
    return params, (mu, nu, count)


def loss_fn(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2)


@jax.jit
def train_step(params, state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params, state = adam_update(params, grads, state)
    return params, state, loss


@jax.jit
def eval_step(params, x, y):
    return loss_fn(params, x, y)


@jax.jit
def feature_energy(projection, x):
    return jax.vmap(lambda row: jnp.sum((projection @ row) ** 2))(x)


@jax.jit
def grad_norm(params, x, y):
    grads = jax.grad(loss_fn)(params, x, y)
    return jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))


@jax.jit
def predict(params, x):
    return x @ params["w"] + params["b"]


@jax.jit
def summarize(pred, y):
    residual = pred - y
    return {
        "mse": jnp.mean(residual**2),
        "mae": jnp.mean(jnp.abs(residual)),
        "r2": 1 - jnp.sum(residual**2) / jnp.sum((y - jnp.mean(y)) ** 2),
    }


def batches(x, y, size):
    # The last, short batch compiles train_step again: two jit_train_step modules.
    for start in range(0, x.shape[0], size):
        yield x[start : start + size], y[start : start + size]


def final_report(params, x, y):
    """After training: more modules compile and run after the one that was wrong."""
    pred = predict(params, x)
    stats = summarize(pred, y)
    spread = jnp.std(pred, axis=0)
    worst = jnp.max(jnp.abs(pred - y))
    as_f32 = jax.tree.map(lambda p: p.astype(jnp.float32), params)
    r2_pct = jax.jit(lambda r: jnp.round(100 * r, 2))(stats["r2"])
    norms = {k: float(jnp.linalg.norm(v)) for k, v in as_f32.items()}
    print(
        f"final: mse {float(stats['mse']):.4f} mae {float(stats['mae']):.4f} r2 {float(r2_pct)}% "
        f"spread {float(spread[0]):.3f} worst {float(worst):.3f} norms {norms}",
        flush=True,
    )


def main() -> int:
    started = time.monotonic()
    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((ROWS, FEATURES))
    true_w = np.array([[1.5], [-2.0], [0.5]])
    y_all = x_all @ true_w + 0.1 * rng.standard_normal((ROWS, 1))
    x_dev, y_dev = jnp.asarray(x_all), jnp.asarray(y_all)

    params = {"w": jnp.zeros((FEATURES, 1)), "b": jnp.zeros((1,))}
    state = (jax.tree.map(jnp.zeros_like, params), jax.tree.map(jnp.zeros_like, params), 0)
    projection = jnp.eye(FEATURES)
    # Same-name siblings: each lambda dumps as jit__lambda.
    scale = jax.jit(lambda v: v * 0.5)
    ema = jax.jit(lambda a, b: 0.9 * a + 0.1 * b)
    clip = jax.jit(lambda v: jnp.clip(v, -10.0, 10.0))

    ema_loss = jnp.zeros(())
    problems = []
    for epoch in range(3):
        for x, y in batches(x_dev, y_dev, 4096):
            params, state, loss = train_step(params, state, x, y)
            ema_loss = ema(ema_loss, clip(loss))
        energy = np.asarray(feature_energy(projection, x_dev))
        if epoch == 0:
            expected = ((x_all @ np.eye(FEATURES).T) ** 2).sum(axis=1)
            bad = np.flatnonzero(~np.isclose(energy, expected, rtol=1e-6))
            if bad.size:
                k = int(bad[0])
                problems.append(
                    f"feature energy mismatch: {bad.size} of {ROWS} rows wrong "
                    f"(row {k}: jit {energy[k]:.6g}, numpy {expected[k]:.6g})"
                )
                print(problems[-1], flush=True)
        dev_loss = eval_step(params, x_dev, y_dev)
        norm = grad_norm(params, x_dev, y_dev)
        print(
            f"epoch {epoch}: loss {float(ema_loss):.4f} dev {float(dev_loss):.4f} "
            f"grad norm {float(scale(norm)) * 2:.4f} mean energy {float(jnp.mean(energy)):.3f}",
            flush=True,
        )
    final_report(params, x_dev, y_dev)
    print(f"done in {time.monotonic() - started:.1f}s", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
