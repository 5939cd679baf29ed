"""A regression between two jaxlib releases: XLA:CPU crashes running a rank-8
broadcast-multiply-reduce (public report jax-ml/jax#39257).

jaxlib 0.10.2 runs ``sum(obs[..., None x5] * A, axis=2)`` as a YNNPACK fusion that dies with
SIGSEGV (some CPUs hang instead); jaxlib 0.10.1 and older compute it correctly. Prints "ok"
when the result is right.
"""

import jax

jax.config.update("jax_platforms", "cpu")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def likelihood(obs, table):
    lik = jnp.sum(obs[..., None, None, None, None, None] * table, axis=2)
    return jnp.log(jnp.maximum(lik, 2.220446049250313e-16))


obs = np.ones((10, 4, 6), np.float32)
table = np.ones((10, 4, 6, 9, 9, 9, 9, 9), np.float32)
print("jax", jax.__version__, "running jit(likelihood)", flush=True)
result = np.asarray(jax.jit(likelihood)(obs, table))
if not np.allclose(result, np.log(6.0)):
    raise SystemExit(f"wrong result: expected log(6), got [{result.min()}, {result.max()}]")
print("ok")
