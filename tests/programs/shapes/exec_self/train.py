"""A training launcher that re-executes itself with its own XLA flags: `python train.py`.

XLA reads XLA_FLAGS once, when jax starts its backend, so the launcher sets them in
os.environ and then replaces its own image with a fresh interpreter running this file again
(`os.execv(sys.executable, [sys.executable, __file__, "--child"])`: the same pid, a new
image, no child process). It appends `--xla_force_host_platform_device_count=4` (four CPU
devices, to exercise the data-parallel path on a laptop) and
`--xla_disable_all_hlo_passes=true` (the launcher's "bit-exact debug mode") to whatever
XLA_FLAGS held. The launcher itself never imports jax.

The re-executed image checks that it sees four devices, runs a jitted loss/gradient step on
each device's shard (compiles and runs fine), then augments the batch with jax.random noise.

What XLA does wrong: compiling jit(augment) with every HLO pass off, XLA's CPU backend
aborts while emitting the constants of the random-number computation (the bug of
tests/programs/compile_crash.py):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

SIGABRT kills the process, whose pid is the one the launcher started with.

Bare run: exit status -6 (SIGABRT; 134 from a shell).
Expected answer: compile crash, in the re-executed image (same pid as the launcher); culprit
jit(augment) (module jit_augment); the replay reproduces the crash (under the flags the
launcher set, not the environment collect started it with).
"""

import os
import sys

FLAGS = ("--xla_force_host_platform_device_count=4", "--xla_disable_all_hlo_passes=true")


def launch() -> None:
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(flags + [f for f in FLAGS if f not in flags])
    print(f"launcher {os.getpid()}: XLA_FLAGS={os.environ['XLA_FLAGS'].strip()}", flush=True)
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "--child"])


def train() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    devices = jax.devices()
    print(f"trainer {os.getpid()}: {len(devices)} devices", flush=True)
    if len(devices) != 4:
        raise SystemExit(f"expected 4 devices, got {len(devices)}")

    @jax.jit
    def loss_and_grad(w, x, y):
        return jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)

    @jax.jit
    def augment(x, key):
        return x + 0.01 * jax.random.normal(key, x.shape)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    y = x @ np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    w = jnp.zeros(8)
    for step in range(3):
        losses, grads = [], []
        for device, xs, ys in zip(devices, np.split(x, 4), np.split(y, 4), strict=True):
            shard = jax.device_put((w, xs, ys), device)
            loss, grad = loss_and_grad(*shard)
            losses.append(float(loss))
            grads.append(np.asarray(grad))
        w = w - 0.1 * np.mean(grads, axis=0)
        print(f"step {step}: mean loss over 4 shards {np.mean(losses):.4f}", flush=True)

    noisy = augment(jnp.asarray(x), jax.random.key(step))
    print(f"augmented batch: mean {float(noisy.mean()):.4f}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        train()
    else:
        launch()
