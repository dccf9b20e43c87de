"""Deterministic synthetic data of any image geometry (seeded), the embedded default."""

from __future__ import annotations

import numpy as np


def synthetic_split(samples: int, height: int, width: int, channels: int, num_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8 NHWC images and int32 labels drawn from a seeded generator; classes balanced."""
    rng = np.random.Generator(np.random.PCG64(seed))
    images = rng.integers(0, 256, size=(samples, height, width, channels), dtype=np.uint8)
    labels = (np.arange(samples, dtype=np.int64) % num_classes).astype(np.int32)
    rng.shuffle(labels)
    return images, labels
