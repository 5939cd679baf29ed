"""A small MLP trainer whose dropout step, which has a jax.debug.print in it, crashes XLA.

`python dropout_train.py` trains a two-layer MLP on synthetic regression data. The program
turns every HLO pass off (`--xla_disable_all_hlo_passes=true`, appended to XLA_FLAGS before
jax starts, to compare numerics against an unoptimised baseline). Evaluation,
`eval_loss`, compiles and runs fine under that flag. The training step, `train_step`, adds
dropout with jax.random (its key made inside the jit, `fold_in(key(SEED), step)`) and,
while the author was debugging it, logs the batch loss from
inside the jit with one `jax.debug.print("train_step: loss {loss:.4f}", loss=loss)` (a host
callback in the compiled module).

What XLA does wrong: compiling jit(train_step) with every HLO pass off, XLA's CPU backend
aborts while emitting the constants of the random-number computation of the dropout mask
(the bug of tests/programs/compile_crash.py):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

The crash is at compile time, so the debug print never runs: no `train_step: loss` line is
printed. SIGABRT kills the process; no Python exception is raised.

Bare run: exit status -6 (SIGABRT; 134 from a shell).
Expected answer: compile crash; culprit jit(train_step) (module jit_train_step), the jit that
holds the debug print; the replay reproduces the crash.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np

HIDDEN = 32
DROPOUT = 0.1
LEARNING_RATE = 0.05
SEED = 0


def forward(params, x, mask=None):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    if mask is not None:
        h = h * mask / (1.0 - DROPOUT)
    return (h @ params["w2"] + params["b2"])[:, 0]


@jax.jit
def eval_loss(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)


@jax.jit
def train_step(params, x, y, step):
    key = jax.random.fold_in(jax.random.key(SEED), step)
    mask = jax.random.bernoulli(key, 1.0 - DROPOUT, (x.shape[0], HIDDEN))
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((forward(p, x, mask) - y) ** 2))(params)
    jax.debug.print("train_step: loss {loss:.4f}", loss=loss)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), loss


def main() -> None:
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((512, 8)).astype(np.float32)
    y = np.sin(x @ np.linspace(-1.0, 1.0, 8)).astype(np.float32)
    params = {
        "w1": jnp.asarray(rng.standard_normal((8, HIDDEN)) / np.sqrt(8), jnp.float32),
        "b1": jnp.zeros(HIDDEN),
        "w2": jnp.asarray(rng.standard_normal((HIDDEN, 1)) / np.sqrt(HIDDEN), jnp.float32),
        "b2": jnp.zeros(1),
    }
    print(f"initial eval loss {float(eval_loss(params, x, y)):.4f}", flush=True)
    for epoch in range(5):
        params, loss = train_step(params, x, y, epoch)
        print(f"epoch {epoch}: train loss {float(loss):.4f}", flush=True)
    print(f"final eval loss {float(eval_loss(params, x, y)):.4f}")


if __name__ == "__main__":
    main()
