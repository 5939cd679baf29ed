"""A layer checked against a float64 reference at 1e-5: on a TPU the float32 matmul runs at
the default precision (one bf16 pass), and the check fails."""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def dense(x, w, b):
    return jnp.tanh(x @ w + b)


rng = np.random.default_rng(0)
x = rng.standard_normal((256, 512)).astype(np.float32)
w = (rng.standard_normal((512, 128)) / np.sqrt(512)).astype(np.float32)
b = rng.standard_normal(128).astype(np.float32)
got = np.asarray(dense(x, w, b))
want = np.tanh(x.astype(np.float64) @ w.astype(np.float64) + b)
err = np.abs(got - want).max()
print(f"max error against float64: {err:.3g}")
if err > 1e-5:
    raise SystemExit(f"dense layer disagrees with the float64 reference: max error {err:.3g}")
