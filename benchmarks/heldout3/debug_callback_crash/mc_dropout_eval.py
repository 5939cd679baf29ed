"""An uncertainty evaluation whose jitted MC-dropout pass, which logs through jax.debug
callbacks, crashes XLA while compiling.

`python mc_dropout_eval.py` fits a two-layer classifier (100 full-batch steps), evaluates it
on a held-out set, then estimates its predictive uncertainty with Monte Carlo dropout.
Every jitted function is built with the same per-jit compiler options,
`jax.jit(f, compiler_options=XLA_OPTIONS)` with
`XLA_OPTIONS = {"xla_disable_hlo_passes": "copy-insertion"}`, which the author took from a
profiling session (no XLA_FLAGS). The training step, `fit_step`, the point estimate,
`predict`, and the accuracy, `accuracy`, compile and run fine under them. The MC-dropout
pass, `mc_predict`, draws 16 dropout masks from keys split inside the jit, and reports from
inside the jit, for the run's log: one `jax.debug.callback(record_pass, ...)` (no result;
it appends the pass's statistics to a host-side list and prints an `mc pass` line) and two
`jax.debug.print`s of the spread of the predictions (`mc spread: ...`).

What XLA does wrong: without copy insertion, buffer assignment finds two constants of
jax.random's threefry split sharing a buffer, and XLA's CPU backend aborts while compiling
jit(mc_predict) (the bug of tests/programs/compile_options_crash.py, here with host
callbacks in the module):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

The crash is at compile time, so no callback runs: nothing of `mc pass` or `mc spread` is
printed. SIGABRT kills the process; no Python exception is raised.

Bare run: exit status -6 (SIGABRT; 134 from a shell).
Expected answer: compile crash; culprit jit(mc_predict) (module jit_mc_predict), the jit
that holds the debug callbacks; the replay reproduces the crash (under the per-jit options).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

XLA_OPTIONS = {"xla_disable_hlo_passes": "copy-insertion"}
SAMPLES = 16
DROPOUT = 0.2
CLASSES = 5

jit = functools.partial(jax.jit, compiler_options=XLA_OPTIONS)
pass_log: list[dict[str, float]] = []


def record_pass(seed, mean_entropy, max_entropy):
    pass_log.append({"seed": int(seed), "mean": float(mean_entropy), "max": float(max_entropy)})
    print(f"mc pass {int(seed)}: entropy mean {float(mean_entropy):.4f}", flush=True)


def logits(params, x, mask=None):
    h = jax.nn.gelu(x @ params["w1"] + params["b1"])
    if mask is not None:
        h = h * mask / (1.0 - DROPOUT)
    return h @ params["w2"] + params["b2"]


@jit
def predict(params, x):
    return jax.nn.softmax(logits(params, x))


@jit
def fit_step(params, x, labels):
    def loss_fn(p):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits(p, x)), labels[:, None], 1))

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree.map(lambda p, g: p - 0.5 * g, params, grads), loss


@jit
def accuracy(probs, labels):
    return jnp.mean(jnp.argmax(probs, axis=-1) == labels)


@jit
def mc_predict(params, x, seed):
    keys = jax.random.split(jax.random.key(seed), SAMPLES)
    hidden = params["w1"].shape[1]

    def one_pass(key):
        mask = jax.random.bernoulli(key, 1.0 - DROPOUT, (x.shape[0], hidden))
        return jax.nn.softmax(logits(params, x, mask))

    probs = jax.vmap(one_pass)(keys)
    mean = probs.mean(axis=0)
    entropy = -jnp.sum(mean * jnp.log(mean + 1e-9), axis=-1)
    jax.debug.callback(record_pass, seed, entropy.mean(), entropy.max())
    jax.debug.print(
        "mc spread: std of p(top class) {s:.4f}", s=probs.max(axis=-1).std(axis=0).mean()
    )
    jax.debug.print(
        "mc spread: {n} of {m} examples change class",
        n=jnp.sum(jnp.any(jnp.argmax(probs, -1) != jnp.argmax(mean, -1), axis=0)),
        m=x.shape[0],
    )
    return mean, entropy


def dataset(rng: np.random.Generator, centers: np.ndarray, n: int):
    labels = rng.integers(0, CLASSES, n)
    x = centers[labels] + rng.standard_normal((n, 10))
    return jnp.asarray(x, jnp.float32), jnp.asarray(labels)


def main() -> None:
    rng = np.random.default_rng(3)
    params = {
        "w1": jnp.asarray(rng.standard_normal((10, 64)) / np.sqrt(10), jnp.float32),
        "b1": jnp.zeros(64),
        "w2": jnp.asarray(rng.standard_normal((64, CLASSES)) / 8.0, jnp.float32),
        "b2": jnp.zeros(CLASSES),
    }
    centers = rng.standard_normal((CLASSES, 10)) * 1.2
    train_x, train_labels = dataset(rng, centers, 2000)
    steps = 100
    for _ in range(steps):
        params, loss = fit_step(params, train_x, train_labels)
    print(f"trained: loss {float(loss):.4f} after {steps} steps", flush=True)
    x, labels = dataset(rng, centers, 400)
    probs = predict(params, x)
    print(f"point estimate: accuracy {float(accuracy(probs, labels)):.3f}", flush=True)
    for seed in range(3):
        mean, entropy = mc_predict(params, x, seed)
        flagged = int(jnp.sum(entropy > 0.9 * np.log(CLASSES)))
        print(f"mc seed {seed}: accuracy {float(accuracy(mean, labels)):.3f}, {flagged} uncertain")
    print(f"{len(pass_log)} mc passes logged")


if __name__ == "__main__":
    main()
