"""A program whose own math makes a NaN that jax_debug_nans stops it at: not XLA's doing.

``jit(side_lengths)`` runs on 4 squares, then on 5 shapes of which the last is digitised
clockwise: its shoelace area is negative, and ``jnp.sqrt`` of it is NaN. jax's check
rejects the call's outputs, runs ``side_lengths`` again de-optimized, op by op (each op a
``jit(sqrt)``-like call of its own), and raises ``FloatingPointError: invalid value (nan)
encountered in sqrt``. XLA computes every op as the references do, on any jaxlib.

Exit status: 1 (the uncaught FloatingPointError).
"""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_debug_nans", True)


@jax.jit
def side_lengths(rings):
    x, y = rings[..., 0], rings[..., 1]
    area = 0.5 * jnp.sum(x * jnp.roll(y, -1, axis=1) - jnp.roll(x, -1, axis=1) * y, axis=1)
    return jnp.sqrt(area)


square = np.array([[0, 0], [2, 0], [2, 2], [0, 2]], np.float32)
print("squares:", np.asarray(side_lengths(jnp.asarray(np.stack([square] * 4)))).tolist())
shapes = np.stack([square * (i + 1) for i in range(4)] + [square[::-1] * 3])
print("shapes:", np.asarray(side_lengths(jnp.asarray(shapes))).tolist())
