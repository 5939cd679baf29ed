"""A program that caps its own memory, catches XLA's out-of-memory error where it meets it
(reading the outputs: jax dispatches asynchronously, so the allocation that failed surfaces
at ``block_until_ready()``, not at the call), says so in its own words and exits 3.

Its jitted step builds a 2,784,000,000-byte table (696,000,000 float32) under an
address-space cap (RLIMIT_AS) 512 MiB above what the process holds once jax is up (about
1.5 GB on Linux with jaxlib 0.10.2): XLA fails with ``RESOURCE_EXHAUSTED: Out of memory
allocating 2784000000 bytes``, an allocation larger than the whole cap, whatever the machine.

``python caught_oom.py in-a-function`` is the same as a service writes it: its own logging at
INFO (so jax logs its probe for a TPU, "Unable to initialize backend 'tpu': INTERNAL: ...", a
status no failure of the program's), the step's output a local of ``main``, and sys.exit
from the ``except``: the output is dropped as SystemExit unwinds, before anything at exit.

Exit status: 3 (the program's own).
"""

import logging
import re
import resource
import sys

if sys.argv[1:] == ["in-a-function"]:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

import jax  # the program's logging is set up first, as a service's is
import jax.numpy as jnp

jnp.ones(3).block_until_ready()  # the backend and its threads are up: their memory counts
with open("/proc/self/status") as f:
    size = int(re.search(r"VmSize:\s+(\d+) kB", f.read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + (512 << 20), resource.RLIM_INFINITY))

ROWS = 696_000_000


@jax.jit
def build_table(scale):
    return jnp.arange(ROWS, dtype=jnp.float32) * scale


def main() -> None:
    log = logging.getLogger("table-service")
    table = build_table(jnp.float32(0.5))
    try:
        table.block_until_ready()
    except jax.errors.JaxRuntimeError:
        log.error("lookup table build failed: not enough memory for 696M rows; giving up")
        sys.exit(3)
    log.info("table ready: %s", float(table[-1]))


if sys.argv[1:] == ["in-a-function"]:
    main()
    sys.exit(0)

table = build_table(jnp.float32(0.5))
try:
    table.block_until_ready()
except jax.errors.JaxRuntimeError:
    print("lookup table build failed: not enough memory for 696M rows", file=sys.stderr)
    sys.exit(3)
print("table ready", float(table[-1]))
