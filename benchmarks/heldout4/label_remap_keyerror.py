"""Fine-tuning a product classifier on a new catalogue export.

Raw catalogue category ids are remapped to contiguous class indices inside the jitted
train step through `io_callback(remap_categories, ...)`, using the taxonomy table loaded
at start-up. The third batch of the export holds category 90117, which was added to the
catalogue after the taxonomy snapshot was taken: the program's own lookup raises
KeyError inside the callback, and the run dies. Not an XLA bug.
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

TAXONOMY = {
    cat: i for i, cat in enumerate([10001, 10002, 10017, 20410, 20411, 31000, 31001, 40555])
}
N_CLASSES = len(TAXONOMY)


def remap_categories(raw_ids):
    return np.asarray([TAXONOMY[int(c)] for c in raw_ids], dtype=np.int32)


def init_params(key, d_in=32):
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (d_in, 64)) * 0.1,
        "w2": jax.random.normal(k2, (64, N_CLASSES)) * 0.1,
    }


def loss_fn(params, x, y):
    h = jax.nn.gelu(x @ params["w1"])
    logits = h @ params["w2"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params, x, raw_cat):
    y = io_callback(remap_categories, jax.ShapeDtypeStruct(raw_cat.shape, jnp.int32), raw_cat)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
    return params, loss


def batches(rng, n_batches=6, bs=128):
    known = np.array(sorted(TAXONOMY))
    for b in range(n_batches):
        cats = rng.choice(known, size=bs)
        if b == 2:
            cats[41] = 90117  # new in this export
        yield rng.normal(size=(bs, 32)).astype(np.float32), cats.astype(np.int32)


def main():
    rng = np.random.default_rng(2024)
    params = init_params(jax.random.key(0))
    t0 = time.time()
    for step, (x, cats) in enumerate(batches(rng)):
        params, loss = train_step(params, x, cats)
        print(f"step {step:3d}  loss {float(loss):.4f}  ({time.time() - t0:.1f}s)", flush=True)
    print("fine-tune finished", file=sys.stderr)


if __name__ == "__main__":
    main()
