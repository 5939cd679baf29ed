"""Wrong result from XLA:CPU's algebraic simplifier in jaxlib 0.10.2, inside a big module.

``log(exp(y))`` is folded to ``y``. Where ``exp(y)`` overflows float32 (y > 88.7) the IEEE
answer is inf, which op-by-op execution (and jax.disable_jit) gives; the jitted program
returns y. Forty layers in front make the module about 400 instructions, of which three
hold the bug. Exit status 1 when the jitted result differs from the eager one.
"""

import jax
import jax.numpy as jnp
import numpy as np


def f(x, w):
    h = x
    for i in range(40):
        h = jnp.tanh(h @ w + i * 0.01) * 1.5 + jnp.sin(h) * 0.1
    y = h.sum(axis=1) * 100.0
    return jnp.log(jnp.exp(y)), h.mean()


x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
w = np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32)
jitted = np.asarray(jax.jit(f)(x, w)[0])
with jax.disable_jit():
    eager = np.asarray(f(x, w)[0])
print("jit", jitted, "eager", eager)
if not np.array_equal(jitted, eager):
    raise SystemExit("wrong result: jax.jit differs from eager")
