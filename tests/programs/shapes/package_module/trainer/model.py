"""A linear embedding with a softmax head, trained by plain SGD."""

import jax
import jax.numpy as jnp
import numpy as np

from trainer.data import CLASSES, FEATURES

EMBED = 16


def init(seed: int = 0) -> dict[str, jax.Array]:
    rng = np.random.default_rng(seed)
    return {
        "embed": jnp.asarray(
            rng.standard_normal((FEATURES, EMBED)) / np.sqrt(FEATURES), jnp.float32
        ),
        "head": jnp.zeros((EMBED, CLASSES), jnp.float32),
    }


def embed(params, x):
    return jnp.tanh(x @ params["embed"])


def loss(params, x, y):
    logits = embed(params, x) @ params["head"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.5 * g, params, grads), value


@jax.jit
def accuracy(params, x, y):
    return jnp.mean(jnp.argmax(embed(params, x) @ params["head"], axis=1) == y)
