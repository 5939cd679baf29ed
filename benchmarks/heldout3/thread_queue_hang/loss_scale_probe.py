"""A mixed-precision loss-scale probe whose jitted search never ends in its worker thread.

`python loss_scale_probe.py` prepares a float16 training run. The job is tuned for speed:
before importing jax it appends XLA's CPU fast-math flags to XLA_FLAGS,

    --xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false
    --xla_cpu_fast_math_honor_infs=false

It computes the gradients of a small model on one batch (jitted, fine), then probes the
largest loss scale the float16 gradients stand: a `lax.while_loop` that doubles the scale
while `all(isfinite(float16(grads * scale)))`. The probe runs in a `threading.Thread`
worker, which calls the jitted `probe_loss_scale` and waits for its value with
`np.asarray(...)`, then puts the answer on a `queue.Queue`. The main thread keeps
preparing the data pipeline (more jitted work, fine) and then waits on the queue with
`get(timeout=...)`: its own watchdog, 20 seconds from the start of the probe. On a timeout
it prints `watchdog: loss-scale probe gave no answer in 20 s, giving up` and ends the
process with `os._exit(70)` (a plain exit would wait for the worker thread forever).

What XLA does wrong: with NaNs and infinities not honoured, XLA's CPU backend treats them
as impossible and folds `isfinite` in the loop's condition to true, so the condition holds
after the scaled float16 gradients have overflowed to inf: XLA's CPU runtime executes
jit(probe_loss_scale) without end, in the worker thread. Without the flags the loop stops
after 19 doublings and the probe answers 262144.

Bare run: exit status 70, after about 20 s of the probe (the watchdog's os._exit; no
Python exception).
Expected answer: hang, with XLA executing jit(probe_loss_scale) (module
jit_probe_loss_scale) in a worker thread when the watchdog ended the process; the replay
under the program's flags reproduces the hang.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false"
    + " --xla_cpu_fast_math_honor_infs=false"
)

import queue
import threading
import time

import jax  # the flags must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np

WATCHDOG_SECONDS = 20.0


@jax.jit
def gradients(params, x, y):
    def loss_fn(p):
        h = jnp.tanh(x @ p["w1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    return jax.grad(loss_fn)(params)


@jax.jit
def probe_loss_scale(grads):
    flat = jnp.concatenate([g.ravel() for g in jax.tree.leaves(grads)])

    def fits(state):
        scale, _ = state
        return jnp.all(jnp.isfinite((flat * scale).astype(jnp.float16)))

    def double(state):
        scale, doublings = state
        return scale * 2.0, doublings + 1

    scale, doublings = jax.lax.while_loop(fits, double, (jnp.float32(1.0), jnp.int32(0)))
    return scale / 2.0, doublings


@jax.jit
def normalize(batch):
    return (batch - batch.mean(axis=0)) / (batch.std(axis=0) + 1e-5)


def probe_worker(grads, answers: queue.Queue) -> None:
    scale, doublings = probe_loss_scale(grads)
    answers.put((float(np.asarray(scale)), int(np.asarray(doublings))))


def main() -> None:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((256, 16)), jnp.float32)
    y = jnp.asarray(rng.standard_normal((256, 4)), jnp.float32)
    params = {
        "w1": jnp.asarray(rng.standard_normal((16, 32)) * 0.25, jnp.float32),
        "w2": jnp.asarray(rng.standard_normal((32, 4)) * 0.18, jnp.float32),
    }
    grads = gradients(params, x, y)
    leaves = jax.tree.leaves(grads)
    norm = float(jnp.sqrt(sum(jnp.sum(g**2) for g in leaves)))
    largest = max(float(jnp.abs(g).max()) for g in leaves)
    print(f"gradient norm {norm:.4f}, largest |g| {largest:.4f}", flush=True)

    answers: queue.Queue = queue.Queue()
    started = time.monotonic()
    worker = threading.Thread(target=probe_worker, args=(grads, answers), name="loss-scale-probe")
    worker.start()
    print("probing the float16 loss scale in a worker thread", flush=True)

    for shard in range(4):
        batch = normalize(jnp.asarray(rng.standard_normal((1024, 16)), jnp.float32))
        print(f"pipeline: shard {shard} normalized, std {float(batch.std()):.3f}", flush=True)

    try:
        scale, doublings = answers.get(timeout=WATCHDOG_SECONDS - (time.monotonic() - started))
    except queue.Empty:
        print(
            f"watchdog: loss-scale probe gave no answer in {WATCHDOG_SECONDS:.0f} s, giving up",
            flush=True,
        )
        os._exit(70)
    print(f"loss scale {scale:g} ({doublings} doublings); starting float16 training")


if __name__ == "__main__":
    main()
