"""A wrong result that only a NaN input shows: a cleanup step under fast math.

With --xla_cpu_enable_fast_math=true and NaNs not honoured, XLA's CPU backend assumes no NaN
and drops `isnan`, so `where(isnan(x), 0, x)` passes the NaN through. On ordinary values the
module is right; a replay on generated inputs agrees with its reference, and only the
extreme "inf/nan" set shows the failure. The program sets the flags itself, as training
scripts that chase speed do, and checks its result against numpy.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false"
    + " --xla_cpu_fast_math_honor_infs=false"
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
if not np.array_equal(got, want):
    print(f"wrong result: clean(x) = {got}, numpy gives {want}")
    raise SystemExit(1)
print("ok")
