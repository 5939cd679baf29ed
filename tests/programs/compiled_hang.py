"""A hang left unrun: the program compiles a loop that never ends, then gives up on it.

XLA compiles (and dumps) `jit_spin`, a while loop whose condition is always true; the
program stops before running it. Replaying `jit_spin` hangs inside XLA until stopped, which
is what a test of stopping a replay needs, without a run that has to be timed out first.
"""

import jax
import numpy as np


@jax.jit
def spin(x):
    return jax.lax.while_loop(lambda c: c == c, lambda c: c + 1, x)


spin.lower(np.int32(0)).compile()
raise SystemExit("jit(spin) never returns: not running it")
