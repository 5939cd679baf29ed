"""A float32 dense layer checked against a NumPy float64 reference at 1e-5.

On a TPU, ``x @ w`` at the default precision runs one bfloat16 pass: the layer disagrees
with the reference by ~1e-2 and np.testing's check fails (a wrong result, exit status 1).
On a CPU, whose float32 dots are float32, the error is ~1e-6 and the check passes. Neither
is an XLA bug.
"""

import jax
import numpy as np


@jax.jit
def dense(x, w):
    return x @ w


rng = np.random.default_rng(0)
x = rng.standard_normal((128, 64)).astype(np.float32)
w = (rng.standard_normal((64, 256)) / 8).astype(np.float32)

got = np.asarray(dense(x, w))
want = x.astype(np.float64) @ w.astype(np.float64)
print(f"dense layer on {jax.devices()[0].platform}")
np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg="dense layer")
print("dense layer matches the reference")
