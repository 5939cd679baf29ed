"""A sharded evaluation of a point-cloud augmentation, 2 processes of 2 CPU devices each.

Started once per process, as srun starts it: ``python prog.py RANK N PORT`` (RANK from 0, N
processes, PORT the coordinator's port on 127.0.0.1, served by process 0).

Each host loads its own slice of a float64 point cloud (16385 points per device), the
points are rotated by the augmentation's matrix and the squared norm of every rotated point
is computed under ``jax.jit`` over a global mesh. A rotation keeps norms, so process 0 checks
the gathered energies against numpy's ``sum(x**2)`` of the whole cloud.

What goes wrong: jax-ml/jax#39103. XLA:CPU in jaxlib 0.10.2 fuses ``vmap(lambda p: sum((R @
p) ** 2))`` into one YNNPACK fusion that, for the element just past the first 128 KiB of each
device's output (point 16384 of a shard), reads another point. No error is raised: the
check on process 0 finds one wrong energy per device and exits 1 (SystemExit with a
message); process 1 only logs its part and finishes (exit 0). Culprit: jit(rotated_energy),
a wrong result.
"""

import os
import sys

RANK, PROCESSES, PORT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
DEVICES_PER_PROCESS = 2
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={DEVICES_PER_PROCESS}"
)

import jax  # noqa: E402  (XLA reads XLA_FLAGS when jax starts it)

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{PORT}", num_processes=PROCESSES, process_id=RANK
)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

POINTS_PER_DEVICE = 16_385
SEED = 20_240_611


def point_cloud(n_points: int) -> np.ndarray:
    """The whole cloud; every host can make it, each keeps only its devices' rows."""
    return np.random.default_rng(SEED).standard_normal((n_points, 3))


def rotation(yaw: float, pitch: float) -> np.ndarray:
    cy, sy, cp, sp = np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch)
    about_z = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    about_y = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    return about_z @ about_y


@jax.jit
def rotated_energy(points: jax.Array, matrix: jax.Array) -> jax.Array:
    return jax.vmap(lambda p: jnp.sum((matrix @ p) ** 2))(points)


def main() -> int:
    mesh = Mesh(np.array(jax.devices()), ("points",))
    by_point = NamedSharding(mesh, PartitionSpec("points"))
    n_points = POINTS_PER_DEVICE * len(jax.devices())
    cloud = point_cloud(n_points)
    points = jax.make_array_from_callback(cloud.shape, by_point, lambda index: cloud[index])
    matrix = jax.device_put(rotation(0.3, -1.1), NamedSharding(mesh, PartitionSpec()))
    print(
        f"process {RANK}/{PROCESSES}: {len(jax.local_devices())} local devices, "
        f"{n_points} points in all",
        flush=True,
    )

    energy = rotated_energy(points, matrix)
    gathered = multihost_utils.process_allgather(energy, tiled=True)
    if RANK == 0:
        expected = np.sum(cloud**2, axis=1)
        wrong = np.flatnonzero(~np.isclose(gathered, expected, rtol=1e-9, atol=0.0))
        print(f"mean energy {gathered.mean():.6f} (expected {expected.mean():.6f})", flush=True)
        if wrong.size:
            first = wrong[0]
            sys.exit(
                f"EVAL FAILED: rotation changed the norm of {wrong.size} of {n_points} points "
                f"(point {first}: {gathered[first]!r}, expected {expected[first]!r})"
            )
    else:
        mine = np.asarray(energy.addressable_shards[0].data)
        print(f"process {RANK}: first shard mean energy {mine.mean():.6f}", flush=True)
    print(f"process {RANK}: eval done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
