"""A 3x3 convolution block (conv + bias + ReLU, twice) of a small image model, checked
against a NumPy float64 reference at 1e-5 before it is used for feature extraction.

Everything is float32. On a TPU, lax.conv_general_dilated at the default precision runs
one bf16 pass, so jit(conv_block) disagrees with the reference by ~1e-2 and the program
exits non-zero; on a CPU the error is ~1e-6 and the check passes.
"""

import jax
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def conv(x, w, b):
    y = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    return jax.nn.relu(y + b)


@jax.jit
def conv_block(x, w1, b1, w2, b2):
    return conv(conv(x, w1, b1), w2, b2)


def conv_ref(x, w, b):
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = sliding_window_view(xp, (3, 3), axis=(1, 2))  # (N, H, W, C, 3, 3)
    return np.maximum(np.einsum("nhwcij,ijco->nhwo", win, w) + b, 0.0)


rng = np.random.default_rng(0)
x = rng.standard_normal((8, 32, 32, 16)).astype(np.float32)
w1 = (rng.standard_normal((3, 3, 16, 32)) / np.sqrt(9 * 16)).astype(np.float32)
w2 = (rng.standard_normal((3, 3, 32, 32)) / np.sqrt(9 * 32)).astype(np.float32)
b1 = (0.1 * rng.standard_normal(32)).astype(np.float32)
b2 = (0.1 * rng.standard_normal(32)).astype(np.float32)

got = np.asarray(conv_block(x, w1, b1, w2, b2))
f64 = [a.astype(np.float64) for a in (x, w1, b1, w2, b2)]
want = conv_ref(conv_ref(f64[0], f64[1], f64[2]), f64[3], f64[4])
err = float(np.abs(got - want).max())
print(f"conv block output {got.shape}, max |out| {np.abs(want).max():.3g}, max error {err:.3g}")
if err > 1e-5:
    raise SystemExit(f"conv block disagrees with the float64 reference: max error {err:.3g} > 1e-5")
print("conv block matches the reference")
