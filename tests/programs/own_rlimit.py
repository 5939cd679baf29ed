"""A program that caps its own address space (``resource.setrlimit``), then runs a module
whose 4 GiB output does not fit under the cap: XLA fails with RESOURCE_EXHAUSTED. A replay
without the same cap would simply succeed on a machine with the memory.
"""

import re
import resource

import jax
import jax.numpy as jnp

jnp.ones(3).block_until_ready()  # the backend and its threads are up: their memory counts
with open("/proc/self/status") as f:
    size = int(re.search(r"VmSize:\s+(\d+) kB", f.read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), resource.RLIM_INFINITY))


@jax.jit
def grow(x):
    return jnp.broadcast_to(x, (1 << 30,)) * 2.0  # 4 GiB of float32


print(grow(jnp.float32(1.0)).sum())
