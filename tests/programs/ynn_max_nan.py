"""XLA's bug: the CPU backend's YNN reduce fusion drops NaN in a float32 ``max`` reduction of
4096 elements or more, though the module asks for NaN propagation (its debug options hold
``xla_cpu_enable_fast_min_max: false``). The worst loss over a batch with one diverged
example comes out 1.0, not NaN (jaxlib 0.10.2, CPU; with
``--xla_cpu_experimental_ynn_fusion_type=`` the program is right, and so is the same
reduction of 1000 elements).

The replay's references turn the YNN fusion off; their NaN is what IEEE arithmetic
propagates from the NaN in the inputs, not a reference whose own arithmetic broke down.
"""

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def worst_loss(losses):
    return jnp.max(losses)


losses = np.linspace(0.0, 1.0, 8192, dtype=np.float32)
losses[4000] = np.nan  # a diverged example
worst = worst_loss(losses)
assert np.isnan(worst), f"max over losses with a NaN should be NaN, got {worst}"
