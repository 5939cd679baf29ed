"""Per-pixel optical power of a sensor, tiny float32 values; one pixel comes out 21% low.

`python pixel_power.py` reads 32769 pixels' three channel voltages (about 2 mV each, float32),
corrects the channels' crosstalk with a 3x3 matrix, and computes each pixel's power into a
1-ohm load, `vmap(lambda v: sum((crosstalk @ v) ** 2))` under jit: about 1.5e-5 W per pixel.
It checks the powers against a float64 numpy reference with
`np.testing.assert_allclose(..., rtol=1e-4)` (no absolute tolerance: every value is tiny).

What XLA does wrong (jax#39103, the bug of tests/programs/wrong_result.py, here on small
float32 values): jaxlib 0.10.2's CPU backend fuses the per-row matrix-vector product, square
and sum into one YNNPACK fusion, which writes the value of another row (row 32736 on the
machine where this was checked; which row depends on the CPU) into element 32768, the one
just past the first 128 KiB of the output. Pixel 32768 gets 1.18868e-05 instead of
1.51072e-05: 21% off, an absolute error of only 3.2e-6, which a tolerance of 1e-5 or 1e-6
would miss. Nothing is raised; numpy and the op-by-op run give the right value.

Bare run: exit status 1 (AssertionError from np.testing: 1 of 32769 elements mismatched).
Expected answer: wrong result; culprit jit(pixel_power) (module jit_pixel_power); the replay
reproduces the wrong result.
"""

import jax
import jax.numpy as jnp
import numpy as np

PIXELS = 32_769
LOAD_OHMS = 1.0
CROSSTALK = np.array(
    [[1.0, 0.02, 0.01], [0.03, 1.0, 0.02], [0.01, 0.04, 1.0]],
    dtype=np.float32,
)


@jax.jit
def pixel_power(volts):
    correct = jnp.asarray(CROSSTALK)
    return jax.vmap(lambda v: jnp.sum((correct @ v) ** 2) / LOAD_OHMS)(volts)


def read_sensor(seed: int = 4) -> np.ndarray:
    noise = np.random.default_rng(seed).standard_normal((PIXELS, 3))
    return (2e-3 * (1.0 + 0.15 * noise)).astype(np.float32)


def main() -> None:
    volts = read_sensor()
    power = np.asarray(pixel_power(jnp.asarray(volts)))
    print(f"pixels: {PIXELS}, mean power {power.mean():.4e} W, min {power.min():.4e} W")
    reference = ((volts.astype(np.float64) @ CROSSTALK.T.astype(np.float64)) ** 2).sum(axis=1)
    np.testing.assert_allclose(power, reference / LOAD_OHMS, rtol=1e-4)
    print("ok: every pixel's power matches the float64 reference")


if __name__ == "__main__":
    main()
