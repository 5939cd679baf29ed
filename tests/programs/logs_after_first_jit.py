"""A job that makes its first jitted call, then sets up its own logging (INFO, its own
format), logs, prints to both streams and warns. Its output under collect must be its bare
output, line for line: jax's jaxpr dump (on under collect) must not configure logging first.

Run: python logs_after_first_jit.py
"""

import logging
import sys
import warnings

import jax
import jax.numpy as jnp

total = jax.jit(lambda x: (x * 2).sum())(jnp.arange(8.0))

logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(name)s | %(message)s")
log = logging.getLogger("job")
log.info("first total %.1f", float(total))
print("stdout: rows 8")
print("stderr: nothing dropped", file=sys.stderr)
warnings.warn("feature 'age' has 3 missing values", UserWarning, stacklevel=1)
second = jax.jit(lambda x: x.mean())(jnp.arange(4.0))
log.info("second mean %.2f", float(second))
log.warning("done")
