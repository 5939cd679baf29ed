"""A wrong result that one jaxlib release brought: XLA:CPU's vmapped mat-vec, squared and
summed (public report jax-ml/jax#39103).

jaxlib 0.10.2 fuses the dot, the square and the sum into one YNNPACK fusion whose output
element just past the first 128 KiB (index 16384 of a float64 result) holds another row's
value; jaxlib 0.10.1 and older compute it correctly. The program checks jit against NumPy
and exits 1 when they disagree.
"""

import jax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

M = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25], [0.0, 0.0, 1.0]])


@jax.jit
def energies(rows):
    return jax.vmap(lambda row: jnp.sum((jnp.asarray(M) @ row) ** 2))(rows)


rows = np.random.default_rng(0).standard_normal((16_385, 3))
got = np.asarray(energies(rows))
want = ((rows @ M.T) ** 2).sum(axis=1)
bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-5, atol=1e-6))
if bad.size:
    k = bad[0]
    raise SystemExit(
        f"wrong result: {bad.size} of {rows.shape[0]} energies differ, [{k}]: {got[k]} != {want[k]}"
    )
print("ok")
