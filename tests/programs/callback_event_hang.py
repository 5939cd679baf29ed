"""Not an XLA bug: the program's own host callback waits on an event nobody sets.

`jit(train_step)` logs each step's loss through `io_callback` (`log_metrics`), which waits
for the metrics writer's `threading.Event` before it writes; the writer thread was never
started, so the wait never ends. XLA's CPU runtime waits for the callback, which waits for
the program: the hang is the program's. A correct tool names the callback
`log_metrics (callback_event_hang.py:LINE)` as running at the stop, says it is not XLA's,
links no tracker, and claims nothing of a replay it never ran.

With an argument, it writes its process id to that file once the callback is waiting.
"""

import os
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

READY = sys.argv[1] if len(sys.argv) > 1 else None
writer_ready = threading.Event()  # set by a writer thread this program forgot to start


def log_metrics(step, loss):
    if READY:
        with open(READY + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(READY + ".tmp", READY)
    writer_ready.wait()
    print(f"step {int(step)}: loss {float(loss):.4f}", flush=True)
    return np.int32(0)


@jax.jit
def train_step(w, x, step):
    loss = jnp.mean((x @ w) ** 2)
    io_callback(log_metrics, jax.ShapeDtypeStruct((), jnp.int32), step, loss)
    return w - 0.01 * jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w)


w = jnp.ones((4,), jnp.float32)
x = jnp.arange(32.0, dtype=jnp.float32).reshape(8, 4)
for step in range(3):
    w = train_step(w, x, step)
print(w)
