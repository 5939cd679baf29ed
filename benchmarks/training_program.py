"""A training program shaped like the ones users collect from, ending in a real XLA crash.

    python benchmarks/training_program.py [--steps 40] [--width 128] [--no-crash]

A small MLP classifier trained with hand-written Adam: many small jitted functions (one
optimiser update per parameter shape, gradient clipping, a learning-rate schedule, metrics,
data augmentation, an EMA of the weights), eager ``jnp`` ops between them (each its own
module), a checkpoint every few steps, and, in the last step, an evaluation compiled with a
real XLA debug option (every HLO pass disabled) that makes XLA's CPU backend abort:

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

Run with ``--xla_dump_hlo_snapshots`` every execution writes a snapshot, as in a real run.
"""

from __future__ import annotations

import argparse
import itertools
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, jax.Array]
CLASSES = 10
FEATURES = 64


def init(key: jax.Array, width: int, depth: int) -> Params:
    sizes = [FEATURES, *([width] * depth), CLASSES]
    params: Params = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        key, sub = jax.random.split(key)
        params[f"w{i}"] = jax.random.normal(sub, (n_in, n_out)) * jnp.sqrt(2.0 / n_in)
        params[f"b{i}"] = jnp.zeros((n_out,))
    return params


def forward(params: Params, x: jax.Array) -> jax.Array:
    layers = len(params) // 2
    for i in range(layers):
        x = x @ params[f"w{i}"] + params[f"b{i}"]
        if i < layers - 1:
            x = jax.nn.gelu(x)
    return x


@jax.jit
def make_batch(key: jax.Array, step: jax.Array) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(jax.random.fold_in(key, step))
    y = jax.random.randint(ky, (128,), 0, CLASSES)
    centers = jnp.sin(jnp.arange(CLASSES * FEATURES, dtype=jnp.float32)).reshape(CLASSES, -1)
    return centers[y] + 0.5 * jax.random.normal(kx, (128, FEATURES)), y


@jax.jit
def augment(key: jax.Array, x: jax.Array) -> jax.Array:
    scale = 1.0 + 0.1 * jax.random.normal(key, (1, x.shape[1]))
    return x * scale


@jax.jit
def loss_and_grads(params: Params, x: jax.Array, y: jax.Array) -> tuple[jax.Array, Params]:
    def loss(p: Params) -> jax.Array:
        logits = forward(p, x)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])

    return jax.value_and_grad(loss)(params)


@jax.jit
def global_norm(grads: Params) -> jax.Array:
    return jnp.sqrt(sum(jnp.sum(g * g) for g in grads.values()))


@jax.jit
def clip(g: jax.Array, norm: jax.Array) -> jax.Array:
    return g * jnp.minimum(1.0, 1.0 / (norm + 1e-6))


@jax.jit
def learning_rate(step: jax.Array) -> jax.Array:
    warm = jnp.minimum(1.0, (step + 1) / 10.0)
    return 3e-3 * warm * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(step / 200.0, 1.0)))


# One compiled update per parameter shape: the many small modules optimisers produce.
@jax.jit
def adam(
    p: jax.Array, g: jax.Array, m: jax.Array, v: jax.Array, lr: jax.Array, t: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    m_hat, v_hat = m / (1 - 0.9**t), v / (1 - 0.999**t)
    return p - lr * m_hat / (jnp.sqrt(v_hat) + 1e-8), m, v


@jax.jit
def ema(avg: jax.Array, p: jax.Array) -> jax.Array:
    return 0.99 * avg + 0.01 * p


@jax.jit
def accuracy(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean(jnp.argmax(forward(params, x), -1) == y)


def evaluate(params: Params, x: jax.Array, key: jax.Array) -> jax.Array:
    # Test-time noise: its random-number constants are what the disabled passes trip over.
    return forward(params, x + 0.01 * jax.random.normal(key, x.shape))


def checkpoint(params: Params, step: int) -> dict[str, Any]:
    # Eager ops on every leaf, as checkpointing code does: each is a small module of its own.
    return {
        name: (np.asarray(p), float(jnp.abs(p).max()), float(jnp.linalg.norm(p.ravel())))
        for name, p in params.items()
    } | {"step": step}


def train(steps: int, width: int, depth: int, crash: bool) -> None:
    key = jax.random.key(0)
    params = init(key, width, depth)
    m = {k: jnp.zeros_like(p) for k, p in params.items()}
    v = {k: jnp.zeros_like(p) for k, p in params.items()}
    avg = dict(params)
    for step in range(steps):
        t = jnp.asarray(step, jnp.float32)
        x, y = make_batch(key, jnp.asarray(step))
        x = augment(jax.random.fold_in(key, 1000 + step), x)
        loss, grads = loss_and_grads(params, x, y)
        norm = global_norm(grads)
        lr = learning_rate(t)
        for k in params:
            params[k], m[k], v[k] = adam(params[k], clip(grads[k], norm), m[k], v[k], lr, t + 1)
            avg[k] = ema(avg[k], params[k])
        if step % 5 == 0:
            acc = accuracy(avg, x, y)
            print(f"step {step}: loss {float(loss):.4f} acc {float(acc):.3f} lr {float(lr):.2e}")
        if step % 10 == 9:
            checkpoint(params, step)
    if crash:
        # A debug option on one compile, as users set when chasing a numerical problem.
        run_eval: Callable[..., jax.Array] = (
            jax.jit(partial(evaluate, params))
            .lower(x, key)
            .compile({"xla_disable_all_hlo_passes": True})
        )
        print(run_eval(x, key).shape)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--no-crash", action="store_true", help="end normally instead")
    args = p.parse_args()
    print(f"pid {os.getpid()}: training {args.steps} steps")
    train(args.steps, args.width, args.depth, crash=not args.no_crash)


if __name__ == "__main__":
    main()
