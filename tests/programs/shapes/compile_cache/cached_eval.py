"""A program that turns on its own persistent compilation cache (in a temporary folder) and
x64, warms the cache up ahead of time, then evaluates with a function served from it.

What XLA does wrong (jax#39103, https://github.com/jax-ml/jax/issues/39103, jaxlib 0.10.2
on CPU): the kinetic energy of each of 16385 particles, `sum((R @ v) ** 2) / 2` vmapped over
float64 velocities and jitted, is fused by XLA into one YNNPACK fusion that, for the
element just past the first 128 KiB of the output (particle 16384), returns the value of
another particle (the mechanism of tests/programs/wrong_result.py).

The program sets `jax_compilation_cache_dir` to a fresh temporary folder (with
`jax_persistent_cache_min_compile_time_secs` 0, so that every compilation is written there)
and `jax_enable_x64`, all through jax.config.update, after jax is imported. It compiles
`kinetic_energy` ahead of time (`.lower(...).compile()`, which writes the cache entry),
clears jax's in-memory caches as a restarted server would, then calls it: that call loads
the executable from the persistent cache, so XLA does not compile it again. The check
against numpy prints `energy check failed: 1 of 16385 particles wrong (particle 16384: ...)`
and the program exits 1.

Bare run: exit status 1.
Expected answer: wrong result; culprit jit(kinetic_energy) (module jit_kinetic_energy); the
replay reproduces the wrong result.
"""

import sys
import tempfile
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

PARTICLES = 16_385  # float64 energies: particle 16384 is the first past 128 KiB
ANGLE = 0.3
ROTATION = np.array(
    [[np.cos(ANGLE), -np.sin(ANGLE), 0.0], [np.sin(ANGLE), np.cos(ANGLE), 0.0], [0.0, 0.0, 1.0]]
)


@jax.jit
def kinetic_energy(rotation, velocities):
    return jax.vmap(lambda v: 0.5 * jnp.sum((rotation @ v) ** 2))(velocities)


def main(cache: Path) -> int:
    jax.config.update("jax_compilation_cache_dir", str(cache))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

    velocities = np.random.default_rng(0).standard_normal((PARTICLES, 3))
    args = (jnp.asarray(ROTATION), jnp.asarray(velocities))
    kinetic_energy.lower(*args).compile()  # warm-up: writes the persistent cache entry
    print(f"cache warmed up: {len(list(cache.iterdir()))} entries", flush=True)
    jax.clear_caches()

    got = np.asarray(kinetic_energy(*args))  # served from the persistent cache
    expected = 0.5 * ((velocities @ ROTATION.T) ** 2).sum(axis=1)
    wrong = np.flatnonzero(~np.isclose(got, expected, rtol=1e-9, atol=0.0))
    print(f"total kinetic energy {got.sum():.3f}")
    if wrong.size:
        k = int(wrong[0])
        print(
            f"energy check failed: {wrong.size} of {PARTICLES} particles wrong "
            f"(particle {k}: jit {got[k]:.6g}, numpy {expected[k]:.6g})"
        )
        return 1
    print("energy check passed")
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="jax-cache-") as folder:
        sys.exit(main(Path(folder)))
