"""A data-preparation driver that uses jax itself, then runs the augmentation step as a child.

`python prepare.py` imports jax and normalizes a dataset under jit (compiles and runs fine),
saves it, then runs `augment.py` in a child python with
`subprocess.run([sys.executable, "augment.py", PATH], check=True)`, as drivers that keep
each step in a fresh interpreter do. The child imports jax too, and asks for XLA's
unoptimised mode (`--xla_disable_all_hlo_passes=true`, appended to its own XLA_FLAGS before
jax starts; the parent runs without it).

What XLA does wrong: in the child, compiling jit(add_noise), which draws jax.random.normal,
XLA's CPU backend aborts while emitting the constants of the random-number computation (the
bug of tests/programs/compile_crash.py):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

The child dies of SIGABRT; the parent's `check=True` raises
`subprocess.CalledProcessError: Command '[...]' died with <Signals.SIGABRT: 6>.` and the
parent exits 1. Both processes compiled modules: the parent's jit(normalize) is fine.

Bare run: exit status 1 (the parent's uncaught CalledProcessError).
Expected answer: compile crash, in the child's process; culprit jit(add_noise) (module
jit_add_noise); the replay reproduces the crash.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def normalize(x):
    return (x - jnp.mean(x, axis=0)) / jnp.std(x, axis=0)


def main() -> None:
    raw = np.random.default_rng(0).gamma(2.0, size=(512, 8)).astype(np.float32)
    data = np.asarray(normalize(jnp.asarray(raw)))
    print(f"prepare: normalized {data.shape[0]} rows, max |z| {np.abs(data).max():.3f}")
    with tempfile.TemporaryDirectory(prefix="prepare-") as tmp:
        path = Path(tmp) / "normalized.npy"
        np.save(path, data)
        print("prepare: running augment.py", flush=True)
        subprocess.run([sys.executable, "augment.py", str(path)], check=True)
    print("prepare: done")


if __name__ == "__main__":
    main()
