"""Train the model, then build a retrieval index: the index build fails inside XLA.

Run from tests/programs/shapes/package_module: `python -m trainer.train`.

What XLA does wrong: after training (train_step and accuracy compile and run fine), the
program scores every catalogue item against every other one, `emb @ emb.T` for 2**20
items: a 2**20 x 2**20 float32 result, 4 TiB. The jitted `similarity` compiles; executing it,
XLA's CPU runtime fails to allocate the result buffer. Dispatch is asynchronous, so the
program first slices the broken result (`scores[:8]`, a module of its own) and the error
surfaces when it reads that slice:

    jax.errors.JaxRuntimeError: INTERNAL: Error dispatching computation: Out of memory
    allocating 4398046511104 bytes.

(the allocation failure of tests/programs/runtime_error.py, RESOURCE_EXHAUSTED there.)

Bare run: exit status 1 (uncaught JaxRuntimeError).
Expected answer: runtime error; culprit jit(similarity) (module jit_similarity); the replay
reproduces the error.
"""

import jax
import jax.numpy as jnp
import numpy as np

from trainer import data, model

ITEMS = 1 << 20  # the whole catalogue
TRAIN_ITEMS = 4096


@jax.jit
def similarity(emb):
    return emb @ emb.T


def main() -> None:
    x, y = data.catalogue(ITEMS)
    params = model.init()
    for epoch in range(2):
        for xb, yb in data.batches(x[:TRAIN_ITEMS], y[:TRAIN_ITEMS], 512):
            params, loss = model.train_step(params, jnp.asarray(xb), jnp.asarray(yb))
        acc = model.accuracy(params, jnp.asarray(x[:TRAIN_ITEMS]), jnp.asarray(y[:TRAIN_ITEMS]))
        print(f"epoch {epoch}: loss {float(loss):.4f} accuracy {float(acc):.3f}", flush=True)

    emb = model.embed(params, jnp.asarray(x))
    print(f"indexing {ITEMS} items", flush=True)
    scores = similarity(emb)
    nearest = np.asarray(scores[:8]).argsort(axis=1)[:, -2]
    print("nearest neighbours of the first items:", nearest.tolist())


if __name__ == "__main__":
    main()
