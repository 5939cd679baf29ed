"""Evaluate per-row energies with a jitted function and check them against numpy.

    python evaluate.py --rows N

What XLA does wrong (jax#39103, https://github.com/jax-ml/jax/issues/39103, jaxlib 0.10.2
on CPU): `vmap(lambda row: sum((P @ row) ** 2))` over float64 rows of 3 features, jitted,
is fused by XLA into one YNNPACK fusion that, for the element just past the first 128 KiB of
the output (row 16384), returns the value of another row (the mechanism of
tests/programs/wrong_result.py). With --rows 16384 no element lies past 128 KiB and the
result is right; with --rows 16385 row 16384 is wrong.

run.sh runs this program twice: the smoke run (16384 rows) prints
`energy check passed: 16384 rows` and exits 0; the full run (16385 rows) prints
`energy check failed: 1 of 16385 rows wrong (row 16384: ...)` and exits 1 (sys.exit(1)).

Bare run (bash run.sh): exit status 1, from the second python process.
Expected answer: wrong result; culprit jit(row_energy) (module jit_row_energy) of the second
run, on 16385 rows (the first run's module, on 16384 rows, computes the right values); the
replay reproduces the wrong result.
"""

import argparse
import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

PROJECTION = np.array([[0.8, 0.6, 0.0], [-0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])


@jax.jit
def row_energy(projection, x):
    return jax.vmap(lambda row: jnp.sum((projection @ row) ** 2))(x)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, required=True)
    rows = parser.parse_args().rows

    x = np.random.default_rng(rows).standard_normal((rows, 3))
    got = np.asarray(row_energy(jnp.asarray(PROJECTION), jnp.asarray(x)))
    expected = ((x @ PROJECTION.T) ** 2).sum(axis=1)
    wrong = np.flatnonzero(~np.isclose(got, expected, rtol=1e-9, atol=0.0))
    print(f"mean energy {got.mean():.4f}")
    if wrong.size:
        k = int(wrong[0])
        print(
            f"energy check failed: {wrong.size} of {rows} rows wrong "
            f"(row {k}: jit {got[k]:.6g}, numpy {expected[k]:.6g})"
        )
        sys.exit(1)
    print(f"energy check passed: {rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
