"""Not an XLA bug: after real jax work the program sleeps in Python, outside XLA.

It prints "ready" once jax has compiled and run jit(scale), then waits in time.sleep, so a
test can stop it (Ctrl-C / SIGTERM) knowing that the jax work is done. Nothing points at
XLA: JAX is not compiling, and the replay of jit(scale) finishes normally.
"""

import time

import jax
import numpy as np


@jax.jit
def scale(x):
    return x * 2.0 + 1.0


print(scale(np.arange(4.0, dtype=np.float32)))
print("ready", flush=True)
time.sleep(3600)
