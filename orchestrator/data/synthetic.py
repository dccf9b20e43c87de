"""Deterministic synthetic data of any image geometry (seeded), the embedded default."""

from __future__ import annotations

import numpy as np

# Rows generated per chunk are a multiple of 8: each chunk then draws whole 64-bit words from
# the generator, so chunked generation yields exactly the bytes of one big call (checked by
# tests/data/test_data_synthetic.py), and the split hash does not depend on the chunk size.
_ROW_MULTIPLE = 8
_CHUNK_BYTES = 64 << 20


def _generator(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _labels(rng: np.random.Generator, samples: int, num_classes: int) -> np.ndarray:
    labels = (np.arange(samples, dtype=np.int64) % num_classes).astype(np.int32)
    rng.shuffle(labels)
    return labels


def chunk_rows(row_bytes: int, chunk_bytes: int = _CHUNK_BYTES) -> int:
    """Rows per chunk: about ``chunk_bytes``, a multiple of 8, at least 8."""
    rows = max(1, chunk_bytes // max(1, row_bytes))
    return max(_ROW_MULTIPLE, rows - rows % _ROW_MULTIPLE)


def synthetic_split(samples: int, height: int, width: int, channels: int, num_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """uint8 NHWC images and int32 labels drawn from a seeded generator; classes balanced."""
    rng = _generator(seed)
    images = rng.integers(0, 256, size=(samples, height, width, channels), dtype=np.uint8)
    return images, _labels(rng, samples, num_classes)


def fill_synthetic(sink, num_classes: int, seed: int, rows: int | None = None) -> None:
    """Stream exactly the data of :func:`synthetic_split` into ``sink`` (a store.SplitWriter: ``samples``,
    ``shape``, ``write(chunk)``, ``labels``) chunk by chunk, never holding the whole split in memory."""
    samples, shape = sink.samples, tuple(sink.shape)
    step = rows or chunk_rows(int(np.prod(shape)))
    if step % _ROW_MULTIPLE:
        raise ValueError(f"rows per chunk must be a multiple of {_ROW_MULTIPLE}")
    rng = _generator(seed)
    for start in range(0, samples, step):
        stop = min(samples, start + step)
        sink.write(rng.integers(0, 256, size=(stop - start, *shape), dtype=np.uint8))
    sink.labels[:] = _labels(rng, samples, num_classes)
