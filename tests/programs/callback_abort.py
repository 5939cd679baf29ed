"""Not an XLA bug: the program's own host callback aborts the process.

`jit(normalise)` checks each frame's header through `jax.pure_callback`
(`_check_header`), which, like the C decoder it stands in for, calls `os.abort()` on a
header with a bad magic number: SIGABRT while XLA executes jit(normalise), from the
program's own Python. Only the process's Python stack at the signal (faulthandler's)
shows the callback. A correct tool names `_check_header (callback_abort.py:LINE)`, says the
crash is not XLA's, links no tracker and claims nothing of a replay (the module calls back
into Python).
"""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

MAGIC = 0x46524D45  # "FRME"


def _check_header(header: np.ndarray) -> np.ndarray:
    if int(header[0]) != MAGIC:
        print(f"framedec: bad magic 0x{int(header[0]):08x}; aborting", file=sys.stderr, flush=True)
        os.abort()
    return np.float32(header[1])


@jax.jit
def normalise(headers, pixels):
    shape = jax.ShapeDtypeStruct((), jnp.float32)
    white = jax.vmap(
        lambda h: jax.pure_callback(_check_header, shape, h, vmap_method="sequential")
    )(headers)
    return pixels / white[:, None]


headers = np.array([[MAGIC, 255], [MAGIC, 4095], [0, 4095]], np.int32)
print("first frame:", normalise(headers[:2], jnp.ones((2, 4))).sum(), flush=True)
print(normalise(headers, jnp.ones((3, 4))).sum())
