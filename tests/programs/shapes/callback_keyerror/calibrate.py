"""Streaming sensor calibration whose io_callback raises KeyError: the program's bug, not XLA's.

`python calibrate.py` calibrates batches of readings from a fleet of sensors. Each batch goes
through one jitted step, `calibrate_batch`, which fetches the sensor's gain and offset from
the program's own registry dict with `jax.experimental.io_callback` (the registry lives on
the host and can be edited while the stream runs, so it is not baked into the jit as a
constant), applies them, and computes the batch's summary under jit.

What goes wrong: the stream holds a batch from sensor 7, which was never registered. The
callback `lookup_calibration` raises `KeyError: 7` on the host while XLA's CPU runtime is
executing jit(calibrate_batch); XLA passes it on as the status of the execution:

    jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error calling callback: Traceback ...
    KeyError: 7

XLA compiles and runs jit(calibrate_batch) correctly: it called the program's callback, and
the callback failed. The INTERNAL status and the CpuCallback wording come from XLA, but the
error is a Python KeyError in the program's own code (a sensor missing from its registry).

Bare run: exit status 1 (the uncaught JaxRuntimeError, after jax prints the callback's
KeyError traceback on stderr).
Expected answer: not an XLA bug (non-XLA failure: the program's callback raised KeyError);
the failure surfaced in jit(calibrate_batch) (module jit_calibrate_batch), and no replay
shows XLA at fault.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

BATCH = 512

# sensor id -> (gain, offset), as loaded from the fleet's calibration sheet
REGISTRY: dict[int, tuple[float, float]] = {
    1: (1.02, -0.15),
    2: (0.97, 0.08),
    3: (1.10, 0.00),
    5: (0.99, 0.21),
}

STREAM = [1, 2, 3, 2, 5, 7, 1]  # the sensor of each incoming batch


def lookup_calibration(sensor_id):
    gain, offset = REGISTRY[int(sensor_id)]
    return np.array([gain, offset], dtype=np.float32)


@jax.jit
def calibrate_batch(raw, sensor_id):
    calibration = io_callback(
        lookup_calibration, jax.ShapeDtypeStruct((2,), jnp.float32), sensor_id, ordered=True
    )
    volts = raw * calibration[0] + calibration[1]
    return volts, jnp.mean(volts), jnp.std(volts)


def read_batch(rng: np.random.Generator, sensor_id: int) -> jax.Array:
    return jnp.asarray(rng.normal(loc=sensor_id, scale=0.3, size=BATCH), jnp.float32)


def main() -> None:
    rng = np.random.default_rng(0)
    totals = {}
    for number, sensor_id in enumerate(STREAM):
        volts, mean, std = calibrate_batch(read_batch(rng, sensor_id), jnp.int32(sensor_id))
        totals[sensor_id] = totals.get(sensor_id, 0) + volts.shape[0]
        print(
            f"batch {number}: sensor {sensor_id} mean {float(mean):.3f} V, std {float(std):.3f} V"
        )
    print(f"calibrated {sum(totals.values())} readings from {len(totals)} sensors")


if __name__ == "__main__":
    main()
