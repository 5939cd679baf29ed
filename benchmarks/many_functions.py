"""A real JAX program with many distinct jitted functions, for benchmarking dump handling.

``python many_functions.py`` builds ``--count`` functions (default 220) of varied op mixes and
sizes, with every ~20th one large (a big captured constant, a long unrolled chain or big
inputs), and calls each once. ``--only NAME --time`` instead builds the one function NAME and
prints, as JSON, how long its ``jit(...).lower().compile()`` and one execution took: the
baseline a bundle's replay is compared with.

The functions depend only on their index, so every run builds the same program.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = Any
Builder = Callable[[np.random.Generator, int, bool], tuple[Callable[..., Array], list[np.ndarray]]]


@dataclass(frozen=True)
class Spec:
    name: str
    fn: Callable[..., Array]
    args: list[np.ndarray]


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _elementwise(
    rng: np.random.Generator, n: int, large: bool
) -> tuple[Callable[..., Array], list]:
    ops = [jnp.sin, jnp.tanh, jnp.exp, jnp.cos, jnp.abs, jax.nn.relu, jax.nn.gelu]
    chain = [ops[int(k)] for k in rng.integers(0, len(ops), 40 if large else 6)]

    def fn(x: Array) -> Array:
        for op in chain:
            x = op(x) * 0.9 + 0.1
        return x

    return fn, [_f32(rng, 1024 if large else n, n)]


def _mlp(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    depth = 12 if large else int(rng.integers(1, 4))

    def fn(x: Array, *ws: Array) -> Array:
        for w in ws:
            x = jax.nn.relu(x @ w)
        return x.sum(axis=0)

    return fn, [_f32(rng, 32, n), *[_f32(rng, n, n) for _ in range(depth)]]


def _softmax(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    def fn(x: Array) -> Array:
        return jax.nn.log_softmax(x, axis=-1) + jax.nn.softmax(x.T, axis=0).T

    return fn, [_f32(rng, 512 if large else 16, n)]


def _layernorm(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    def fn(x: Array, g: Array) -> Array:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g

    return fn, [_f32(rng, 256 if large else 8, n), _f32(rng, n)]


def _conv(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    side, chans = (64, 16) if large else (min(n, 32), 4)

    def fn(x: Array, k: Array) -> Array:
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME")
        return jax.nn.relu(y).mean(axis=(2, 3))

    return fn, [_f32(rng, 2, chans, side, side), _f32(rng, chans, chans, 3, 3)]


def _scan(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    def fn(h: Array, xs: Array, w: Array) -> Array:
        def step(c: Array, x: Array) -> tuple[Array, Array]:
            c = jnp.tanh(c @ w + x)
            return c, c.sum()

        return jax.lax.scan(step, h, xs)

    steps = 64 if large else 8
    return fn, [_f32(rng, n), _f32(rng, steps, n), _f32(rng, n, n)]


def _sort(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    def fn(x: Array) -> Array:
        s = jnp.sort(x, axis=-1)
        return s, jnp.argsort(x, axis=0), jnp.cumsum(s, axis=-1)

    return fn, [_f32(rng, 256 if large else 4, n)]


def _unrolled(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    # A Python loop is traced into one long straight-line HLO: large text dumps.
    steps = 300 if large else 12
    scales = [float(s) for s in rng.uniform(0.5, 1.5, steps)]

    def fn(x: Array, y: Array) -> Array:
        for i, s in enumerate(scales):
            x = jnp.where(x > 0, x * s, y - s) if i % 2 else jnp.maximum(x, y) * s - x
        return x

    return fn, [_f32(rng, n), _f32(rng, n)]


def _constant(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    # A captured numpy array becomes an HLO constant; --xla_dump_large_constants prints it all.
    table = _f32(rng, 384 if large else 8, n)

    def fn(x: Array) -> Array:
        return x @ table.T + table.sum()

    return fn, [_f32(rng, 4, n)]


def _reduce(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    def fn(x: Array) -> Array:
        return x.max(0) - x.min(1).sum() + jnp.argmax(x, 1).astype(jnp.float32).mean()

    return fn, [_f32(rng, 1024 if large else n, n)]


def _attention(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    seq = 256 if large else 16

    def fn(q: Array, k: Array, v: Array) -> Array:
        w = jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[-1]), axis=-1)
        return w @ v

    return fn, [_f32(rng, seq, n) for _ in range(3)]


def _gather(rng: np.random.Generator, n: int, large: bool) -> tuple[Callable[..., Array], list]:
    rows = 4096 if large else 64

    def fn(table: Array, idx: Array) -> Array:
        return table[idx].sum(0) + table.at[idx].add(1.0).mean()

    idx = rng.integers(0, rows, 32).astype(np.int32)
    return fn, [_f32(rng, rows, n), idx]


BUILDERS: tuple[tuple[str, Builder], ...] = (
    ("elementwise", _elementwise),
    ("mlp", _mlp),
    ("softmax", _softmax),
    ("layernorm", _layernorm),
    ("conv", _conv),
    ("scan", _scan),
    ("sort", _sort),
    ("unrolled", _unrolled),
    ("constant", _constant),
    ("reduce", _reduce),
    ("attention", _attention),
    ("gather", _gather),
)
SIZES = (8, 16, 32, 48, 64, 96, 128, 256)


def spec(i: int) -> Spec:
    """Function number ``i``: its kind, size and data depend only on ``i``."""
    kind, build = BUILDERS[i % len(BUILDERS)]
    rng = np.random.default_rng(i)
    large = i % 20 == 19
    fn, args = build(rng, int(rng.choice(SIZES)), large)
    name = f"f{i:03d}_{kind}{'_large' if large else ''}"
    fn.__name__ = fn.__qualname__ = name  # becomes the module name jit_<name>
    return Spec(name, fn, args)


def run_all(count: int) -> None:
    for i in range(count):
        s = spec(i)
        jax.block_until_ready(jax.jit(s.fn)(*s.args))
    print(f"ran {count} jitted functions")


def time_one(name: str, count: int) -> dict[str, float]:
    """Compile and run one function the way the program does, timed separately."""
    s = next(s for s in map(spec, range(count)) if s.name == name)
    args = [jax.device_put(a) for a in s.args]
    jax.block_until_ready(args)
    t0 = time.perf_counter()
    compiled = jax.jit(s.fn).lower(*args).compile()
    t1 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    t2 = time.perf_counter()
    return {"compile_s": t1 - t0, "run_s": t2 - t1}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=220, help="how many functions (default 220)")
    p.add_argument("--only", metavar="NAME", help="with --time: the one function to time")
    p.add_argument("--time", action="store_true", help="print compile and run time as JSON")
    args = p.parse_args()
    if args.time:
        print(json.dumps(time_one(args.only, args.count)))
    else:
        run_all(args.count)


if __name__ == "__main__":
    main()
