"""Learning-rate sweep with JAX's persistent compilation cache turned on.

The sweep keeps compiled executables in `./jax_cc` (created next to where it runs) so that
reruns skip compilation, with the thresholds at 0 so that every module is cached, and it
turns XLA's HLO passes off to make the many small compiles quicker. The data is
standardised first (that compiles, runs and is cached); then the per-epoch shuffle,
`jax.random.permutation` inside the jitted epoch, makes XLA's CPU compiler abort on a CHECK
(buffer assignment meets a constant of the random-bits loop). XLA's crash, under the
program's own `--xla_disable_all_hlo_passes=true`.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax
import jax.numpy as jnp
import numpy as np

CACHE = os.path.abspath("jax_cc")
os.makedirs(CACHE, exist_ok=True)
jax.config.update("jax_compilation_cache_dir", CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@jax.jit
def standardise(x):
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6)


def epoch(w, x, y, epoch_idx, lr):
    key = jax.random.fold_in(jax.random.key(0), epoch_idx)
    order = jax.random.permutation(key, x.shape[0])
    xs, ys = x[order].reshape(8, -1, x.shape[1]), y[order].reshape(8, -1)

    def step(w, batch):
        bx, by = batch
        g = jax.grad(lambda w: jnp.mean((bx @ w - by) ** 2))(w)
        return w - lr * g, None

    w, _ = jax.lax.scan(step, w, (xs, ys))
    return w


epoch_jit = jax.jit(epoch)


def main():
    rng = np.random.default_rng(3)
    x = standardise(rng.normal(3.0, 2.0, size=(256, 10)).astype(np.float32))
    y = x @ jnp.arange(1.0, 11.0) + 0.1
    print(f"cache: {CACHE} ({len(os.listdir(CACHE))} entries)", flush=True)
    for lr in (0.3, 0.1, 0.03):
        w = jnp.zeros(10)
        for e in range(5):
            w = epoch_jit(w, x, y, e, lr)
        print(f"lr={lr:<5} mse={float(jnp.mean((x @ w - y) ** 2)):.5f}", flush=True)


if __name__ == "__main__":
    main()
