"""nan_fast_math.py's cleanup step under the program's own fast-math flags, checked with an
``assert`` (an uncaught AssertionError, whose status the program's main module's end shows).

With --xla_cpu_enable_fast_math=true and NaNs not honoured, XLA's CPU backend assumes no NaN
and drops `isnan`, so `where(isnan(x), 0, x)` passes the NaN through; without the flags the
module is right: the flags make the wrong value, as they are documented to allow.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false"
)

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def clean(x):
    return jnp.where(jnp.isnan(x), 0.0, x) * 2.0


x = np.array([1.0, np.nan, 3.0, -4.0], np.float32)
got = np.asarray(clean(x))
want = np.where(np.isnan(x), 0.0, x) * 2.0
assert np.array_equal(got, want), f"wrong result: clean(x) = {got}, numpy gives {want}"
print("ok")
