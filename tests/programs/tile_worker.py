# Copy of benchmarks/heldout5/tile_worker.py: test data of tests/collecting/own_callback_test.py.
"""One shard of the orthophoto pipeline: decode tiles, tone-map them to the target.

Tile headers are parsed by the vendored decoder through a host callback; like
the C library it wraps, it aborts the process on a header it cannot trust.
"""

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

MAGIC = 0x54494C45  # "TILE"


def make_tiles(shard: int, n: int = 8):
    rng = np.random.default_rng(100 + shard)
    headers = np.full((n, 2), [MAGIC, 256], dtype=np.int64)
    if shard == 2:
        headers[5, 0] = 0x0  # a tile the camera wrote while its card was full
    pixels = rng.integers(0, 4096, size=(n, 256)).astype(np.float32)
    return headers, pixels


def _decoder_check_header(header: np.ndarray) -> np.ndarray:
    magic, length = int(header[0]), int(header[1])
    if magic != MAGIC:
        sys.stderr.write(f"tiledec: bad magic 0x{magic:08x} (expected 0x{MAGIC:08x}); aborting\n")
        sys.stderr.flush()
        os.abort()  # what the C decoder does on a corrupt header
    return np.float32(4095.0 if length == 256 else 1023.0)


def decode_gain(header):
    return jax.pure_callback(
        _decoder_check_header,
        jax.ShapeDtypeStruct((), jnp.float32),
        header,
        vmap_method="sequential",
    )


@jax.jit
def tone_map(headers, pixels, target):
    white = jax.vmap(decode_gain)(headers)
    x = pixels / white[:, None]
    gamma = jnp.log(target) / jnp.log(jnp.clip(x.mean(axis=1, keepdims=True), 1e-3, 0.999))
    y = jnp.clip(x, 1e-6, 1.0) ** gamma
    return y.mean(axis=1), y.std(axis=1)


def main() -> int:
    jax.config.update("jax_enable_x64", False)
    shard, target = int(sys.argv[1]), float(sys.argv[2])
    headers, pixels = make_tiles(shard)
    mean, std = tone_map(jnp.asarray(headers, jnp.int32), jnp.asarray(pixels), jnp.float32(target))
    print(
        json.dumps(
            {
                "shard": shard,
                "mean": round(float(mean.mean()), 4),
                "std": round(float(std.mean()), 4),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
