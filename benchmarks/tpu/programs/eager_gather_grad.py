"""Gradients of a feature gather taken eagerly (no jit) and under jit must agree; on
libtpu 0.0.42 the eager one zeroes half the batch (public report jax-ml/jax#39025)."""

import jax
import jax.numpy as jnp
import numpy as np

batch, features, width = 256, 8, 128
keep = jnp.arange(features)


def select(x):
    return x[:, keep, :]


x = jax.random.normal(jax.random.key(3), (batch, features, width))
cot = jax.random.normal(jax.random.key(4), (batch, features, width))
eager = np.asarray(jax.vjp(select, x)[1](cot)[0])
jitted = np.asarray(jax.vjp(jax.jit(select), x)[1](cot)[0])
bad = int((np.abs(eager - np.asarray(cot)) > 1e-3).any(axis=(1, 2)).sum())
print(f"eager gradient: {bad} of {batch} rows wrong; jit: {np.allclose(jitted, cot)}")
if bad:
    raise SystemExit(f"eager gradient wrong in {bad} of {batch} rows")
