"""Compile crash inside XLA's algebraic simplifier (jaxlib 0.10.2, CPU).

Public report: https://github.com/jax-ml/jax/issues/26051 ("RET_CHECK failure using odeint
with simple case"); this is its program. odeint's error norm takes ``abs`` of a complex
iota, and algsimp replaces ``abs(iota)`` (a non-negative iota) by the iota itself, whose
type is complex. Measured here (jax/jaxlib 0.10.2): the process aborts while compiling with
``algebraic_simplifier.cc:586] Check failed: computation->Accept(this) is OK (INTERNAL:
RET_CHECK failure (external/xla/xla/hlo/ir/hlo_computation.cc:1766)
ShapeUtil::Compatible(old_instruction->shape(), new_instruction->shape()) "abs.0" (f64[2]{0})
vs "iota" (c128[2]{0})``; with ``--xla_disable_hlo_passes=algsimp`` it prints
``[0.+0.j 22026.46580719+0.j]``.
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.experimental.ode import odeint  # noqa: E402


def final_state(a):
    def rhs(y, t):
        return a * y

    y0 = jnp.array([0.0, 1.0], dtype=complex)
    return odeint(rhs, y0, jnp.array([0.0, 10.0]), atol=1e-10, rtol=1e-10)[-1]


print(jax.jit(final_state)(1.0))
