"""Not an XLA bug: the program's own host callback never returns, and its watchdog ends it.

`jit(fuse)` reads a sensor through `jax.pure_callback` (`read_sensor`), which waits on a
queue that the sensor thread should fill; the program never starts that thread, so the
read never returns. The program's watchdog times each sensor read: 10 s after a read
starts it prints "watchdog: sensor read exceeded 10 s, exiting" and calls `os._exit(75)`,
with XLA still executing jit(fuse), waiting for the callback. No Python exception, no
signal: only the process's stack at its own exit shows the callback running. A correct
tool names `read_sensor (callback_watchdog_exit.py:LINE)`, says the hang is not XLA's,
links no tracker and claims nothing of a replay (the module calls back into Python).
"""

import os
import queue
import threading

import jax
import jax.numpy as jnp
import numpy as np

WATCHDOG_SECONDS = 10.0
readings: queue.Queue = queue.Queue()  # filled by a sensor thread this program never starts
read_started = threading.Event()


def read_sensor(x):
    read_started.set()
    return np.asarray(readings.get(), np.float32) * np.ones_like(x)


def watchdog() -> None:
    read_started.wait()
    if not threading.Event().wait(WATCHDOG_SECONDS):
        print(f"watchdog: sensor read exceeded {WATCHDOG_SECONDS:.0f} s, exiting", flush=True)
        os._exit(75)


@jax.jit
def fuse(x):
    shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jnp.mean(x + jax.pure_callback(read_sensor, shape, x))


threading.Thread(target=watchdog, daemon=True).start()
print(fuse(jnp.arange(4.0, dtype=jnp.float32)))
