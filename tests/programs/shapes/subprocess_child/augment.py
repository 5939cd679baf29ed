"""The augmentation step prepare.py runs in a child python: `python augment.py DATA.npy`.

See prepare.py for what XLA does wrong here.
"""

import os
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_disable_all_hlo_passes=true"

import jax  # the flag must be in XLA_FLAGS before jax starts XLA
import jax.numpy as jnp
import numpy as np


@jax.jit
def add_noise(x, key):
    return x + 0.05 * jax.random.normal(key, x.shape)


def main(path: str) -> None:
    data = jnp.asarray(np.load(path))
    print(f"augment: {data.shape[0]} rows loaded", flush=True)
    noisy = add_noise(data, jax.random.key(0))
    np.save(path, np.asarray(noisy))
    print(f"augment: wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1])
