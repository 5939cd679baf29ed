"""A small RNN trained with jax.checkpoint (rematerialisation) and grad through lax.scan.

What XLA does wrong: the program runs XLA with every HLO pass off
(`--xla_disable_all_hlo_passes=true`, appended to XLA_FLAGS before jax starts, as one does
to rule XLA's optimisations out of a numerical question). The forward pass alone, a
lax.scan over a jax.checkpoint'ed cell, compiles and runs under the flag (jit(evaluate)
prints the initial loss). The train step differentiates through that scan; compiling it,
XLA's CPU backend fails:

    jax.errors.JaxRuntimeError: FAILED_PRECONDITION: BufferAllocation::Slice for instruction
    Arg_1.1 at index {} cannot be determined at compile-time.

(Without jax.checkpoint the same train step aborts on a CHECK instead,
`hlo_value.h:241] Check failed: values_.size() == 1`.) The weights are made with numpy, since
jax.random's own modules abort under this flag (see tests/programs/compile_crash.py).

Bare run: exit status 1 (uncaught JaxRuntimeError), at the first train step.
Expected answer: compile error; culprit jit(train_step) (module jit_train_step; jit(evaluate),
compiled before it, is fine); the replay reproduces the error.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np

HIDDEN, INPUTS, STEPS, BATCH = 16, 4, 12, 8


def init(seed: int = 0) -> dict[str, jax.Array]:
    rng = np.random.default_rng(seed)
    return {
        "wx": jnp.asarray(rng.standard_normal((INPUTS, HIDDEN)) / 2.0, jnp.float32),
        "wh": jnp.asarray(rng.standard_normal((HIDDEN, HIDDEN)) / 4.0, jnp.float32),
        "wo": jnp.asarray(rng.standard_normal((HIDDEN, 1)) / 4.0, jnp.float32),
    }


def loss(params, xs, ys):
    @jax.checkpoint
    def cell(h, x):
        h = jnp.tanh(x @ params["wx"] + h @ params["wh"])
        return h, h @ params["wo"]

    _, preds = jax.lax.scan(cell, jnp.zeros((xs.shape[1], HIDDEN)), xs)
    return jnp.mean((preds - ys) ** 2)


@jax.jit
def evaluate(params, xs, ys):
    return loss(params, xs, ys)


@jax.jit
def train_step(params, xs, ys):
    value, grads = jax.value_and_grad(loss)(params, xs, ys)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), value


def main() -> None:
    rng = np.random.default_rng(1)
    xs = jnp.asarray(rng.standard_normal((STEPS, BATCH, INPUTS)), jnp.float32)
    ys = jnp.cumsum(xs[..., :1], axis=0) / STEPS  # a running sum to predict
    params = init()
    print(f"initial loss {float(evaluate(params, xs, ys)):.4f}", flush=True)
    for step in range(20):
        params, value = train_step(params, xs, ys)
        if step % 5 == 0:
            print(f"step {step}: loss {float(value):.4f}", flush=True)
    print(f"final loss {float(evaluate(params, xs, ys)):.4f}")


if __name__ == "__main__":
    main()
