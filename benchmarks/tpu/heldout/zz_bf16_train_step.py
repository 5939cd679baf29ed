"""A bf16 MLP training step; the program compiles it with an XLA option of its own (every
HLO pass disabled, to debug a numerics issue), which the TPU compiler refuses with a
RET_CHECK: it needs its scheduling passes."""

import jax
import jax.numpy as jnp
import numpy as np


def init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        (jax.random.normal(k, (m, n), jnp.bfloat16) / np.sqrt(m), jnp.zeros(n, jnp.bfloat16))
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=False)
    ]


def loss(params, x, y):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    logits = (x @ w + b).astype(jnp.float32)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


def step(params, x, y):
    g = jax.grad(loss)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, g, strict=False)]


params = init(jax.random.key(0), [512, 1024, 1024, 10])
x = jax.random.normal(jax.random.key(1), (128, 512), jnp.bfloat16)
y = jax.nn.one_hot(jnp.arange(128) % 10, 10)
train = jax.jit(step, donate_argnums=0, compiler_options={"xla_disable_all_hlo_passes": True})
for _i in range(3):
    params = train(params, x, y)
print("trained:", float(loss(params, x, y)))
