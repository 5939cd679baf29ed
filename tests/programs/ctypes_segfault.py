"""Not XLA's: the program's own native call crashes while XLA runs its jitted step.

Each step is dispatched (jax returns before XLA has run it) and the program then reads a
buffer of its own through ctypes; at the third step the pointer it passes has been cut to
its low bits (a handle mangled on its way through an integer field), and ``ctypes.string_at``
reads unmapped memory: SIGSEGV (exit status 139 bare), with faulthandler's stack showing the
thread it hit inside ``string_at``, called from this file, with no jax frame on it. XLA's
threads may still be running ``jit(step)``; its replay runs to the end (jaxlib 0.10.2, CPU).
"""

import ctypes

import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum()


x = jnp.ones((512, 512))
for i in range(3):
    loss = step(x)  # dispatched: XLA runs it while Python goes on
    buf = ctypes.create_string_buffer(64)
    address = ctypes.addressof(buf)
    if i == 2:
        address &= 0xFFF  # the handle's low bits only: page zero, never mapped
    ctypes.string_at(address, 8)
    print(i, float(loss), flush=True)
