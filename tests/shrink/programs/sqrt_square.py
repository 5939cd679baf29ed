"""Wrong result from XLA:CPU's algebraic simplifier (jaxlib 0.10.2, CPU).

Public report: https://github.com/jax-ml/jax/issues/37919 ("jax.jit XLA algebraic
simplification of sqrt(abs(square(x))) changes result at float32 overflow boundary").

``sqrt(abs(square(x)))`` is folded to ``abs(x)``. For x = float32 max, square(x) overflows,
so the IEEE answer is inf, which op-by-op execution gives. Measured here (jax/jaxlib 0.10.2):
eager [inf], jit [3.4028235e+38]; with ``--xla_disable_hlo_passes=algsimp`` the jitted result
is [inf] too. The issue sets jax_enable_x64; it fails the same without it. Exit status 1 when
the jitted result differs from the eager one.
"""

import jax
import jax.numpy as jnp
import numpy as np


def f(x):
    return jnp.sqrt(jnp.abs(jnp.square(x)))


x = jnp.array([np.finfo(np.float32).max], dtype=jnp.float32)
eager = np.asarray(f(x))
jitted = np.asarray(jax.jit(f)(x))
print("eager", eager, "jit", jitted)
if not np.array_equal(jitted, eager):
    raise SystemExit("wrong result: jax.jit differs from eager")
