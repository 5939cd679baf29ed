"""A training loop whose 30-odd modules include six same-name siblings; one of them fails.

An MLP trained with SGD and momentum, a learning-rate schedule, gradient clipping and a
table of metrics built from ``jax.jit(lambda ...)``: six modules all named ``jit__lambda``,
all compiled ahead for the same shapes. At step 2 the loop also logs the "activation map"
metric, the third lambda, which broadcasts to 2**20 x 2**20 floats (4 TiB): XLA fails to
allocate its result at execution, ``Out of memory allocating ... bytes``.

With ``--checkpoint-on-error`` the loop does what training frameworks do on an error: it
saves a checkpoint with jitted functions of its own (compiled and run after the failure),
then re-raises. The newest snapshot is then the checkpoint's, not the culprit's.

XLA:CPU runs a computation on a large input asynchronously: the failure shows when its
result is read (``float``), with an error line in XLA's log. With ``--metrics-of-norms`` the
metrics are of the four weight norms instead of the activations: on so small an input XLA
runs the computation at the call, which raises the error itself.

With ``--no-warm-up`` the metrics are compiled at their first call instead of ahead.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

LAYERS, WIDTH, BATCH, STEPS, FAILING_STEP = 4, 64, 32, 4, 2


def init(key):
    keys = jax.random.split(key, LAYERS)
    return [jax.random.normal(k, (WIDTH, WIDTH)) * 0.1 for k in keys]


def mlp(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return x


@jax.jit
def loss_fn(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


grad_fn = jax.jit(jax.grad(loss_fn))


@jax.jit
def clip(grads):
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads))
    return [g * jnp.minimum(1.0, 1.0 / (norm + 1e-6)) for g in grads]


@jax.jit
def schedule(step):
    return 0.1 * jnp.exp(-0.01 * step)


@jax.jit
def momentum_update(params, velocity, grads, lr):
    velocity = [0.9 * v + g for v, g in zip(velocity, grads, strict=True)]
    return [p - lr * v for p, v in zip(params, velocity, strict=True)], velocity


@jax.jit
def normalise(x):
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6)


@jax.jit
def ema_update(ema, params):
    return [0.99 * e + 0.01 * p for e, p in zip(ema, params, strict=True)]


@jax.jit
def weight_norms(params):
    return jnp.stack([jnp.linalg.norm(p) for p in params])


@jax.jit
def eval_loss(params, x, y):
    return jnp.mean(jnp.abs(mlp(params, x) - y))


# A metrics table, as training scripts build them: every entry is its own jit(<lambda>).
METRICS = {
    "mean": jax.jit(lambda a: jnp.mean(a)),
    "max_abs": jax.jit(lambda a: jnp.max(jnp.abs(a))),
    "activation_map": jax.jit(lambda a: jnp.broadcast_to(a.mean(), (1 << 20, 1 << 20)) * 2),
    "min": jax.jit(lambda a: jnp.min(a)),
    "std": jax.jit(lambda a: jnp.std(a)),
    "energy": jax.jit(lambda a: jnp.sum(a * a)),
}
EVERY_STEP = [name for name in METRICS if name != "activation_map"]


@jax.jit
def to_host_layout(params):
    return [jnp.asarray(p, jnp.float32).T for p in params]


@jax.jit
def checksum(params):
    return sum(jnp.sum(p) for p in params)


def save_checkpoint(params):
    saved = [np.asarray(p) for p in to_host_layout(params)]
    print(f"checkpoint saved: {len(saved)} arrays, checksum {float(checksum(params)):.4f}")


def train(warm_up, on_norms):
    params = init(jax.random.key(0))
    velocity = [jnp.zeros_like(p) for p in params]
    ema = params
    rng = np.random.default_rng(0)
    metrics = METRICS
    if warm_up:
        # Compiled ahead: the six siblings get consecutive module numbers. (XLA then reports
        # the failure when the result is read, not when the call is made.)
        batch = jax.ShapeDtypeStruct((LAYERS,) if on_norms else (BATCH, WIDTH), jnp.float32)
        metrics = {name: fn.lower(batch).compile() for name, fn in METRICS.items()}
    for step in range(STEPS):
        x = normalise(jnp.asarray(rng.standard_normal((BATCH, WIDTH), dtype=np.float32)))
        y = jnp.asarray(rng.standard_normal((BATCH, WIDTH), dtype=np.float32))
        grads = clip(grad_fn(params, x, y))
        params, velocity = momentum_update(params, velocity, grads, schedule(step))
        ema = ema_update(ema, params)
        out = weight_norms(params) if on_norms else mlp(params, x)
        jax.block_until_ready((params, ema, out))  # the step ends here, for its timing
        logged = {name: float(metrics[name](out)) for name in EVERY_STEP}
        if step == FAILING_STEP:
            logged["activation_map"] = float(metrics["activation_map"](out)[0, 0])
        logged["norms"] = np.asarray(weight_norms(params)).round(3).tolist()
        logged["eval"] = float(eval_loss(ema, x, y))
        print(f"step {step} loss {float(loss_fn(params, x, y)):.4f}", logged)
    return params


def main():
    args = sys.argv[1:]
    checkpoint_on_error = "--checkpoint-on-error" in args
    warm_up = "--no-warm-up" not in args
    on_norms = "--metrics-of-norms" in args
    params = init(jax.random.key(1))
    try:
        params = train(warm_up, on_norms)
    except Exception:
        if checkpoint_on_error:
            save_checkpoint(params)
        raise
    print("done")


if __name__ == "__main__":
    main()
