"""Hang: a jitted while loop whose condition never becomes false runs forever inside XLA.

Given a file name, the program writes its process id there once XLA has compiled the loop,
just before running it. A test that stops the run only after that file exists knows the
run is inside XLA's execution, however long importing jax took.
"""

import os
import sys
from pathlib import Path

import jax
import numpy as np


@jax.jit
def spin(x):
    return jax.lax.while_loop(lambda c: c >= 0, lambda c: (c + 1) % 1000, x)


print("starting", flush=True)
x = np.int32(0)
compiled = spin.lower(x).compile()  # compiled ahead: the call below only runs it
if len(sys.argv) > 1:
    ready = Path(sys.argv[1])
    # Written whole, then renamed: a reader never sees a half-written file.
    ready.with_suffix(".tmp").write_text(f"{os.getpid()}\n")
    ready.with_suffix(".tmp").replace(ready)
# Nothing is printed from here on: the compile log's last line is the last output.
print(compiled(x))
