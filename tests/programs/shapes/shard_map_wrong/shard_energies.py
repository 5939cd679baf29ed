"""Per-particle kinetic energies computed with jax.shard_map over 4 CPU devices.

`python shard_energies.py` asks for 4 host devices itself
(`--xla_force_host_platform_device_count=4`, appended to XLA_FLAGS before jax starts), shards
65540 float64 velocities by rows over a mesh of the 4 devices, and has each device compute
its own rows' energies in the frame of a rotated sensor:
`vmap(lambda v: 0.5 * mass * sum((frame @ v) ** 2))`, under jit. It then checks the
result against numpy, prints a `FAILED:` line and exits 1.

What XLA does wrong (jax#39103, the bug of tests/programs/wrong_result.py): jaxlib 0.10.2's
CPU backend fuses the per-row matrix-vector product, square and sum into one YNNPACK fusion,
which writes the value of another row into the element just past the first 128 KiB of its
output. Each device's part of the partitioned module has 16385 float64 rows, so on every
device the shard's row 16384 (rows 16384, 32769, 49154 and 65539 of the whole) is wrong;
nothing is raised. The same energies computed by numpy, or op by op, are right.

Bare run: exit status 1, after `FAILED: 4 of 65540 energies differ from numpy ...`.
Expected answer: wrong result; culprit jit(shard_energies) (module jit_shard_energies, one
module partitioned over 4 devices, whose inputs only the capture hook records); the replay
reproduces the wrong result.
"""

import os
import sys
from functools import partial

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import jax  # the flag must be in XLA_FLAGS before jax starts XLA

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

PER_DEVICE = 16_385
MASS = 2.5


def sensor_frame(degrees: float) -> np.ndarray:
    """The rotation from the sensor's axes to the lab's, about z."""
    t = np.deg2rad(degrees)
    return np.array([[np.cos(t), -np.sin(t), 0.0], [np.sin(t), np.cos(t), 0.0], [0.0, 0.0, 1.0]])


mesh = jax.make_mesh((4,), ("rows",))
frame = jnp.asarray(sensor_frame(30.0))


@jax.jit
@partial(jax.shard_map, mesh=mesh, in_specs=P("rows"), out_specs=P("rows"))
def shard_energies(velocities):
    return jax.vmap(lambda v: 0.5 * MASS * jnp.sum((frame @ v) ** 2))(velocities)


def main() -> int:
    print(f"devices: {len(jax.devices())} ({jax.devices()[0].platform})")
    rows = 4 * PER_DEVICE
    velocities = np.random.default_rng(0).standard_normal((rows, 3))
    sharded = jax.device_put(velocities, NamedSharding(mesh, P("rows")))
    got = np.asarray(shard_energies(sharded))
    want = 0.5 * MASS * np.sum((velocities @ sensor_frame(30.0).T) ** 2, axis=1)
    print(f"total energy: {got.sum():.6f} (numpy {want.sum():.6f})")

    bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-9, atol=0.0))
    if bad.size:
        k = bad[0]
        print(
            f"FAILED: {bad.size} of {rows} energies differ from numpy "
            f"(row {k}: {got[k]:.6f}, numpy {want[k]:.6f})"
        )
        return 1
    print("ok: every energy matches numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
