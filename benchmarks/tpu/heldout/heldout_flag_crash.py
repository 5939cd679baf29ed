"""Inference step of a classifier head: layernorm, projection, softmax over classes.

While chasing a numerics difference, the user compiles this one function with every HLO
pass disabled (compiler_options={"xla_disable_all_hlo_passes": True}) so that XLA runs
the graph "as written". The TPU compiler cannot build an executable without its own
passes (no schedule), and compiling jit(classify) fails with a RET_CHECK / INTERNAL error.
"""

import jax
import jax.numpy as jnp
import numpy as np

BATCH, DIM, CLASSES = 64, 768, 100


def layernorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * gamma + beta


def classify(params, x):
    h = layernorm(x, params["gamma"], params["beta"])
    probs = jax.nn.softmax(h @ params["w"] + params["b"], axis=-1)
    return jnp.argmax(probs, -1), probs.max(-1)


rng = np.random.default_rng(0)
params = {
    "gamma": np.ones(DIM, np.float32),
    "beta": np.zeros(DIM, np.float32),
    "w": (rng.standard_normal((DIM, CLASSES)) / np.sqrt(DIM)).astype(np.float32),
    "b": np.zeros(CLASSES, np.float32),
}
x = rng.standard_normal((BATCH, DIM)).astype(np.float32)

infer = jax.jit(classify, compiler_options={"xla_disable_all_hlo_passes": True})
print(f"classifying {BATCH} embeddings into {CLASSES} classes", flush=True)
labels, conf = infer(params, x)
print("labels:", np.asarray(labels)[:8].tolist(), "mean confidence:", float(conf.mean()))
