"""Synthetic data: a catalogue of items, each with a feature vector and a label."""

import numpy as np

FEATURES = 16
CLASSES = 4


def catalogue(items: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=items)
    centers = rng.standard_normal((CLASSES, FEATURES)).astype(np.float32)
    noise = 0.3 * rng.standard_normal((items, FEATURES)).astype(np.float32)
    return centers[labels] + noise, labels


def batches(x: np.ndarray, y: np.ndarray, size: int):
    for start in range(0, len(x) - size + 1, size):
        yield x[start : start + size], y[start : start + size]
