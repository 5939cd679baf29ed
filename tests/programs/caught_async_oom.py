"""A program whose jitted call fails after its dispatch returned: XLA cannot allocate the
call's output, and the program meets the error only where it waits on the result, catches
it, says so in its own words and exits with its own status (78).

``_init`` builds a 7,967,155,356,715,109 x 64 float32 table (2,039,591,771,319,067,904
bytes: more than any machine has) scaled by an array that a slower computation is still
making when ``_init`` (compiled ahead) is called: jax dispatches it at once, and XLA's
``RESOURCE_EXHAUSTED: Out of memory allocating 2039591771319067904 bytes.`` surfaces only
at the wait. The scale (1100 x 1024 float32, 4.5 MB) is more than the 1 MB of arguments a
run under ``--max-dump-size 1MB`` keeps, so the start-up hook does not wait on it either.
The error is the same on every machine and every jaxlib that cannot allocate 1.8 EiB.

``python caught_async_oom.py HOW``: how the program waits: ``block_until_ready`` (the
default) or ``jax.block_until_ready``. (With jaxlib 0.10.2 on the CPU, a host copy of such
an output, ``np.asarray``, ``float``, ``.item()`` or ``jax.device_get``, never returns.)
The table is a local of ``main``, dropped when ``main`` returns, before ``sys.exit``.

Exit status: 78 (the program's own: sysexits.h's configuration error).
"""

import logging
import sys

import jax
import jax.numpy as jnp

ROWS = 2_000_003 * 500_009 * 257 * 31  # the product of the cardinalities (their sum was meant)
log = logging.getLogger("embedding")


@jax.jit
def feature_scale(x):
    for _ in range(12):
        x = jnp.tanh(x @ jnp.ones((1024, 1024), jnp.float32) / 1024.0)
    return x


def table_builder(rows):
    """``_init`` for ``rows``, compiled ahead: its call only dispatches."""

    @jax.jit
    def _init(scale):
        key = jax.random.key(2)
        return jax.random.normal(key, (rows, 64), jnp.float32) * scale[0, 0]

    return _init.lower(jax.ShapeDtypeStruct((1100, 1024), jnp.float32)).compile()


def wait(how, table):
    if how == "jax.block_until_ready":
        jax.block_until_ready(table)
    else:
        table.block_until_ready()


def main(how):
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(name)s: %(message)s")
    smoke = table_builder(1024)(jnp.ones((1100, 1024), jnp.float32))
    log.info("smoke table ok: %s", smoke.shape)
    build = table_builder(ROWS)
    scale = feature_scale(jnp.ones((1100, 1024), jnp.float32))
    try:
        table = build(scale)
        wait(how, table)
    except jax.errors.JaxRuntimeError as err:
        first = str(err).splitlines()[0]
        log.error("could not materialise the table (%s); check the config", first)
        return 78
    log.info("table ready: %s", table.shape)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "block_until_ready"))
