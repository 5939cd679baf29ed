"""Small MLP denoiser for sensor traces: standardise, evaluate the untrained net, then train.

The copy pass was turned off while chasing a memory regression ("every copy XLA inserts
is 40 MB at production size"); it stayed in the launcher since.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_disable_hlo_passes=copy-insertion"
).strip()

import jax
import jax.numpy as jnp
import numpy as np

WIDTH = 64
DROPOUT = 0.1


def make_traces(n: int, length: int, seed: int):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 8 * np.pi, length, dtype=np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1)).astype(np.float32)
    clean = np.sin(t[None, :] + phase) * rng.uniform(0.5, 2.0, size=(n, 1)).astype(np.float32)
    noisy = clean + rng.normal(scale=0.3, size=clean.shape).astype(np.float32)
    return noisy, clean


@jax.jit
def standardise(x):
    mu = x.mean(axis=0, keepdims=True)
    sd = x.std(axis=0, keepdims=True)
    return (x - mu) / (sd + 1e-6), mu, sd


def init_params(length: int):
    k1, k2 = np.random.default_rng(0).normal(size=(2, length, WIDTH)).astype(np.float32) * 0.05
    return {"w_in": jnp.asarray(k1), "w_out": jnp.asarray(k2.T.copy())}


def apply(params, x):
    h = jax.nn.gelu(x @ params["w_in"])
    return h @ params["w_out"]


@jax.jit
def evaluate(params, x, y):
    return jnp.mean((apply(params, x) - y) ** 2)


@jax.jit
def train_step(params, x, y, step):
    key = jax.random.fold_in(jax.random.key(1234), step)

    def loss_fn(p):
        keep = jax.random.bernoulli(key, 1.0 - DROPOUT, x.shape)
        return jnp.mean((apply(p, jnp.where(keep, x / (1.0 - DROPOUT), 0.0)) - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), loss


def main():
    noisy, clean = make_traces(256, 128, seed=3)
    x, mu, sd = standardise(jnp.asarray(noisy))
    y = (jnp.asarray(clean) - mu) / (sd + 1e-6)
    params = init_params(x.shape[1])
    mse0 = float(evaluate(params, x, y))
    print(f"standardised {x.shape[0]} traces; untrained eval mse = {mse0:.4f}")
    for step in range(200):
        params, loss = train_step(params, x, y, step)
        if step % 50 == 0:
            print(f"step {step:4d}  train mse {float(loss):.4f}")
    print(f"final eval mse = {float(evaluate(params, x, y)):.4f}")


if __name__ == "__main__":
    main()
