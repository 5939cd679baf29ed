"""Not an XLA bug: the program's own host callback sleeps, inside a jitted function.

`jit(calibrate)` calls the program's Python through `jax.pure_callback`
(`fetch_gain`), which waits on a slow "sensor" with `time.sleep`. XLA's CPU runtime is
running the computation the whole time, but only because it is waiting for the program's
own Python to return: the hang is the callback's. A correct tool says the program's own
host callback `fetch_gain (callback_sleep_hang.py:LINE)` was running when it was stopped,
not XLA's, links no tracker and claims nothing of a replay it never ran (a module with a
host callback cannot be replayed without the program).

With an argument, it writes its process id to that file once the callback is running.
"""

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

READY = sys.argv[1] if len(sys.argv) > 1 else None


def fetch_gain(x):
    if READY:
        with open(READY + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(READY + ".tmp", READY)
    time.sleep(3600)  # the sensor never answers
    return np.float32(2.0) * np.ones_like(x)


@jax.jit
def calibrate(x):
    shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
    gain = jax.pure_callback(fetch_gain, shape, x)
    return jnp.tanh(x * gain).sum()


print("calibrating", flush=True)
print(calibrate(jnp.arange(8.0, dtype=jnp.float32)))
