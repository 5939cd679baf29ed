"""One training step of a single-layer self-attention model on long documents.

Batch 4, sequence 16384, 8 heads of width 64, in float32. Plain (non-flash) attention
materializes the score matrix (4, 8, 16384, 16384): 32 GiB for one copy, and the backward
pass needs the softmax probabilities and their gradient as well. One TPU v5e chip has
15.75 GiB of HBM, so compiling jit(train_step) fails with
"RESOURCE_EXHAUSTED: Ran out of memory on HBM" before anything runs.
"""

import jax
import jax.numpy as jnp
import numpy as np

BATCH, SEQ, DIM, HEADS = 4, 16384, 512, 8


def init(key):
    ks = jax.random.split(key, 4)
    return {
        n: jax.random.normal(k, (DIM, DIM), jnp.float32) / np.sqrt(DIM)
        for n, k in zip(("wq", "wk", "wv", "wo"), ks, strict=False)
    }


def attention(p, x):
    b, s, _ = x.shape

    def split(t):
        return t.reshape(b, s, HEADS, DIM // HEADS).transpose(0, 2, 1, 3)

    q, k, v = split(x @ p["wq"]), split(x @ p["wk"]), split(x @ p["wv"])
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(DIM // HEADS)
    out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
    return out.transpose(0, 2, 1, 3).reshape(b, s, DIM) @ p["wo"]


def loss_fn(p, x, y):
    return jnp.mean((attention(p, x) - y) ** 2)


@jax.jit
def train_step(p, x, y):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree.map(lambda w, gw: w - 1e-3 * gw, p, g), loss


rng = np.random.default_rng(0)
x = rng.standard_normal((BATCH, SEQ, DIM), dtype=np.float32)
y = rng.standard_normal((BATCH, SEQ, DIM), dtype=np.float32)
params = init(jax.random.key(0))
print(f"training on batch {x.shape}, scores {(BATCH, HEADS, SEQ, SEQ)} float32", flush=True)
params, loss = train_step(params, x, y)
print("loss:", float(loss))
