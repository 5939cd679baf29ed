"""Data-parallel training step on 4 CPU devices (the CI stand-in for a 4-GPU box).

The script gives itself 4 host devices and, as its launcher does on the GPU box, turns
XLA's HLO passes off to debug a sharding issue. The batch is sharded over a 1-d mesh
("data") and the step applies dropout with `jax.random.bernoulli`. XLA's CPU compiler
aborts on a CHECK (buffer_assignment_util.cc) while compiling the sharded step: XLA's
crash under the program's own flags
`--xla_force_host_platform_device_count=4 --xla_disable_all_hlo_passes=true`.
"""

import os

os.environ["XLA_FLAGS"] = (
    "--xla_force_host_platform_device_count=4 --xla_disable_all_hlo_passes=true"
)

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("data",))
batch_sharding = NamedSharding(mesh, P("data"))
replicated = NamedSharding(mesh, P())


@jax.jit
def train_step(w, x, y, step):
    key = jax.random.fold_in(jax.random.key(0), step)

    def loss(w):
        keep = jax.random.bernoulli(key, 0.8, x.shape)
        h = jnp.where(keep, x / 0.8, 0.0)
        return jnp.mean((h @ w - y) ** 2)

    loss_value, g = jax.value_and_grad(loss)(w)
    return w - 0.01 * g, loss_value


def main():
    print(f"devices: {jax.device_count()} ({jax.devices()[0].platform})", flush=True)
    rng = np.random.default_rng(5)
    x = jax.device_put(rng.normal(size=(64, 32)).astype(np.float32), batch_sharding)
    y = jax.device_put(rng.normal(size=(64, 4)).astype(np.float32), batch_sharding)
    w = jax.device_put(np.zeros((32, 4), np.float32), replicated)
    for step in range(10):
        w, loss = train_step(w, x, y, step)
        if step % 5 == 0:
            print(f"step {step} loss {float(loss):.4f}", flush=True)


if __name__ == "__main__":
    main()
