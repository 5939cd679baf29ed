"""Geometric features of land parcels for the valuation model.

Per parcel: area (shoelace formula), perimeter, the side of the square of the
same area, and compactness (Polsby-Popper). NaN checking is on while the
feature set is being developed.
"""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_debug_nans", True)

MAX_VERTICES = 8


def load_parcels(seed: int):
    """Parcels as vertex rings padded by repeating the last vertex (a zero-length edge)."""
    rng = np.random.default_rng(seed)
    rings, counts = [], []
    for i in range(64):
        n = int(rng.integers(4, MAX_VERTICES + 1))
        angles = np.sort(rng.uniform(0, 2 * np.pi, n))
        radius = rng.uniform(10.0, 40.0, n)
        ring = np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)
        if i == 41:
            ring = ring[::-1]  # a parcel digitised clockwise by the county's old GIS
        ring = np.concatenate([ring, np.repeat(ring[-1:], MAX_VERTICES - n, axis=0)])
        rings.append(ring)
        counts.append(n)
    return np.asarray(rings, np.float32), np.asarray(counts, np.int32)


def shoelace_area(ring):
    x, y = ring[:, 0], ring[:, 1]
    return 0.5 * jnp.sum(x * jnp.roll(y, -1) - jnp.roll(x, -1) * y)


def perimeter(ring):
    return jnp.sum(jnp.linalg.norm(jnp.roll(ring, -1, axis=0) - ring, axis=1) + 1e-12)


@jax.jit
def parcel_features(rings):
    area = jax.vmap(shoelace_area)(rings)
    perim = jax.vmap(perimeter)(rings)
    side = jnp.sqrt(area)
    compactness = 4 * jnp.pi * area / perim**2
    return jnp.stack([area, perim, side, compactness], axis=1)


@jax.jit
def summarise(features):
    return features.mean(axis=0), features.std(axis=0)


def main():
    warm, _ = load_parcels(seed=1)
    mean, _ = summarise(parcel_features(jnp.asarray(warm[:40])))
    print("calibration batch (40 parcels): mean", np.round(np.asarray(mean), 2).tolist())
    rings, counts = load_parcels(seed=1)
    feats = parcel_features(jnp.asarray(rings))
    print(
        f"{len(counts)} parcels; feature means",
        np.round(np.asarray(feats.mean(axis=0)), 2).tolist(),
    )


if __name__ == "__main__":
    main()
