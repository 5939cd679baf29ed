"""A user's pytest file, run with `python -m pytest -x test_augment.py` (fd capture on).

What XLA does wrong: the module turns every HLO pass off
(`--xla_disable_all_hlo_passes=true`, appended to XLA_FLAGS before jax starts, as a test
suite that wants unoptimised numerics does). XLA's CPU backend then aborts while emitting
the constants of a random-number computation:

    buffer_assignment_util.cc:46] Check failed: const_instr == nullptr

The first two tests compile and pass (normalize is fine without passes); the third compiles
`augment`, which draws jax.random.normal, and SIGABRT kills pytest itself. pytest captures
fd 2, so XLA's CHECK line goes to pytest's capture file and never reaches the terminal; only
faulthandler's "Fatal Python error: Aborted" and the Python stack do.

Bare run: exit status -6 (SIGABRT; 134 from a shell), in `test_augment_keeps_shape`.
Expected answer: compile crash; culprit jit(augment) (module jit_augment); the replay
reproduces the crash.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np

BATCH = np.arange(32.0, dtype=np.float32).reshape(8, 4)


@jax.jit
def normalize(x):
    return (x - jnp.mean(x, axis=0)) / (jnp.std(x, axis=0) + 1e-6)


@jax.jit
def augment(x, key):
    return x + 0.1 * jax.random.normal(key, x.shape)


def test_normalize_centers_columns():
    out = normalize(BATCH)
    np.testing.assert_allclose(np.asarray(out).mean(axis=0), 0.0, atol=1e-5)


def test_normalize_matches_numpy():
    expected = (BATCH - BATCH.mean(axis=0)) / (BATCH.std(axis=0) + 1e-6)
    np.testing.assert_allclose(np.asarray(normalize(BATCH)), expected, rtol=1e-5)


def test_augment_keeps_shape():
    out = augment(jnp.asarray(BATCH), jax.random.key(0))
    assert out.shape == BATCH.shape


def test_augment_is_small():
    out = augment(jnp.asarray(BATCH), jax.random.key(1))
    assert float(jnp.max(jnp.abs(out - BATCH))) < 1.0
