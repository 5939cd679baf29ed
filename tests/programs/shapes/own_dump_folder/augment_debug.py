"""A program that dumps XLA's work into its own ./xla_dump folder, then crashes XLA.

`python augment_debug.py` is a data-augmentation script its author is debugging. Before
importing jax it empties ./xla_dump and appends to XLA_FLAGS

    --xla_dump_to=./xla_dump --xla_dump_hlo_pass_re=.* --xla_disable_hlo_passes=copy-insertion

to get every module's HLO after every pass in a folder of its own (a relative path: the
folder is in the directory the program runs in), with copy insertion turned off, the pass
its author suspects of slowing the augmentation down. It normalizes a batch, runs a jitted
forward pass and its gradient (all fine under those flags), then augments the batch with
noise from two keys split off one (`jax.random.split`, normal times uniform) under jit.

What XLA does wrong: without copy insertion, buffer assignment finds two constants of
jax.random's threefry split sharing a buffer and XLA's CPU backend aborts while compiling
jit(augment) (the bug of tests/programs/compile_options_crash.py, here through XLA_FLAGS):

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

SIGABRT kills the process. ./xla_dump is left holding the dumps of every module compiled
before the crash and the partial dumps of jit(augment): on jaxlib 0.10.2 CPU 478 files,
about 5.3 MB (436 in the folder itself, and module.mlir, compile_options.textproto and
topology.textproto in each of 14 per-module folders), the same names and contents every
run. The user reads them, so a tool must leave the folder as the bare run leaves it, and
take its own dumps elsewhere.

Bare run: exit status -6 (SIGABRT; 134 from a shell).
Expected answer: compile crash; culprit jit(augment) (module jit_augment); the replay
reproduces the crash.
"""

import os
import shutil

DUMP = "./xla_dump"

shutil.rmtree(DUMP, ignore_errors=True)  # this run's dumps only
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_dump_to={DUMP} --xla_dump_hlo_pass_re=.*"
    + " --xla_disable_hlo_passes=copy-insertion"
)

import jax  # noqa: E402  (the flags must be in XLA_FLAGS before jax starts XLA)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


@jax.jit
def normalize(x):
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6)


@jax.jit
def forward(w, x):
    return jnp.tanh(x @ w).mean()


@jax.jit
def augment(key, x):
    noise_key, scale_key = jax.random.split(key)
    noise = jax.random.normal(noise_key, x.shape)
    return x + 0.1 * noise * jax.random.uniform(scale_key, x.shape)


def main() -> None:
    rng = np.random.default_rng(0)
    batch = normalize(jnp.asarray(rng.standard_normal((64, 8)), jnp.float32))
    print(f"normalized batch: max |mean| {float(jnp.abs(batch.mean(axis=0)).max()):.2e}")
    w = jnp.asarray(rng.standard_normal((8, 4)) * 0.1, jnp.float32)
    print(f"forward: {float(forward(w, batch)):.4f}")
    print(f"gradient norm: {float(jnp.linalg.norm(jax.grad(forward)(w, batch))):.4f}", flush=True)
    augmented = augment(jax.random.key(0), batch)
    print(f"augmented batch: std {float(augmented.std()):.4f}")


if __name__ == "__main__":
    main()
