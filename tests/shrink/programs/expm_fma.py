"""NaN from XLA:CPU's code generator inside a big module (jaxlib 0.10.2, CPU).

Public report: https://github.com/jax-ml/jax/issues/38609 ("jax.jit produces nan when
jax.scipy.linalg.expm output is used in scaled dot-product attention"), its first reproducer.

The jitted function returns NaN everywhere, while running it op by op gives finite values.
Measured here (jax/jaxlib 0.10.2, AMD EPYC, AVX2 and FMA), first row:
eager [2.1076884 0.7011127 -0.21764016 0.08972669 0.07841968], jit [nan nan nan nan nan]
(every row NaN). ``--xla_cpu_max_isa=AVX`` gives the eager values, and so does
``--xla_disable_hlo_passes=fusion`` (the softmax's ``x*scale`` is then not recomputed in two
fusions, where LLVM contracts one of them into an FMA); ``--xla_cpu_enable_fast_math=false``
does not help. The module is about 430 instructions (expm's Padé step and squaring loop).
Exit status 1 when the jitted result differs from the eager one.
"""

import jax
import jax.numpy as jnp
import numpy as np


def inputs():
    key, out = jax.random.PRNGKey(344146), []
    for shape in [(5,), (5, 5), (5, 5)]:
        key, sub = jax.random.split(key)
        out.append(jax.random.normal(sub, shape))
    return out


def f(t, k, v):
    y = jnp.expm1(jnp.clip(t, -4, 4))
    m = jnp.outer(y, jnp.arctan2(t, t))
    q = jax.scipy.linalg.expm((m @ m) * 0.1)
    weights = jax.nn.softmax((q @ k.T) * q.shape[-1] ** -0.5, axis=-1)
    return weights @ v


args = inputs()
eager = np.asarray(f(*args))
jitted = np.asarray(jax.jit(f)(*args))
print("eager", eager[0], "jit", jitted[0])
if not np.allclose(jitted, eager, rtol=1e-3, atol=1e-3):
    raise SystemExit("wrong result: jax.jit differs from eager")
