"""The pipeline's jobs; each runs in a spawned worker, which imports jax itself."""


def fit():
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def fit_step(w, x, y):
        grads = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * grads

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((256, 4)), jnp.float32)
    y = x @ jnp.array([1.0, -2.0, 0.5, 3.0])
    w = jnp.zeros(4)
    for _ in range(50):
        w = fit_step(w, x, y)
    return f"weights {np.round(np.asarray(w), 2).tolist()}"


def augment():
    import jax
    import jax.numpy as jnp

    @jax.jit
    def augment_batch(x, key):
        return x + 0.05 * jax.random.normal(key, x.shape)

    out = augment_batch(jnp.ones((128, 4)), jax.random.key(7))
    return f"augmented batch, mean {float(out.mean()):.3f}"


def score():
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def zscores(x):
        return (x - jnp.mean(x, axis=0)) / jnp.std(x, axis=0)

    x = jnp.asarray(np.random.default_rng(1).standard_normal((512, 4)), jnp.float32)
    return f"max |z| {float(jnp.max(jnp.abs(zscores(x)))):.2f}"


def run(name: str) -> None:
    result = {"fit": fit, "augment": augment, "score": score}[name]()
    print(f"job {name}: {result}", flush=True)
