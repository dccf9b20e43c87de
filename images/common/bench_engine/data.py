"""Read a canonical bench dataset split and verify its content hash.

Canonical form (written by the orchestrator, ``orchestrator/data``): a folder holding
``images.npy`` (uint8, N x H x W x C) and ``labels.npy`` (int32, N). The split's sha256 is
the hash of the bytes of ``images.npy`` followed by those of ``labels.npy``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench_engine.contract import Parity

CANONICAL_FILES = ("images.npy", "labels.npy")
_CHUNK = 8 << 20


def split_sha256(folder: Path) -> str:
    """sha256 of a canonical split folder (the files in their fixed order)."""
    digest = hashlib.sha256()
    for name in CANONICAL_FILES:
        with open(folder / name, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Dataset:
    """A split as an engine holds it: its first ``held`` samples (all of them unless :meth:`prefix` cut it)."""

    images: np.ndarray  # uint8 N x H x W x C (the held samples)
    labels: np.ndarray  # int32 N
    sha256: str  # of the whole split, as read
    split_samples: int | None = None  # the whole split's samples when fewer are held

    @property
    def samples(self) -> int:
        """Samples of the split (the spec's count), held or not."""
        return int(self.labels.shape[0]) if self.split_samples is None else self.split_samples

    @property
    def held(self) -> int:
        return int(self.labels.shape[0])

    def prefix(self, count: int, copy: bool = True) -> Dataset:
        """The split with only its first ``count`` samples held: the samples a run's steps read when they
        read fewer than the split (an inference run of 120 batches of 1 reads 120 of 30,720 images), so an
        engine prepares and places only those. ``samples`` stays the split's. ``copy``: into memory (out of
        a memory map); otherwise views."""
        count = min(count, self.held)
        if count == self.held and not copy:
            return self
        images, labels = self.images[:count], self.labels[:count]
        if copy:
            images, labels = np.array(images), np.array(labels)
        return Dataset(images=images, labels=labels, sha256=self.sha256, split_samples=self.samples)


class DatasetError(RuntimeError):
    """The dataset is missing, malformed or not the one the spec names."""


def _check_files(root: Path) -> None:
    for name in CANONICAL_FILES:
        if not (root / name).is_file():
            raise DatasetError(f"dataset file missing: {root / name}")


def _verified(root: Path, sha: str, expected_sha256: str | None) -> str:
    if expected_sha256 and sha != expected_sha256:
        raise DatasetError(f"dataset hash {sha[:12]} does not match the spec's {expected_sha256[:12]} ({root})")
    return sha


def map_split(folder: str | Path, sha256: str, mmap: bool = False) -> Dataset:
    """The split's arrays, not hashed here: ``sha256`` is the hash the caller holds for it (the spec's while a
    :class:`SplitHash` reads the files; the read-back one from :func:`load_dataset`)."""
    root = Path(folder)
    _check_files(root)
    mode = "r" if mmap else None
    images = np.load(root / "images.npy", allow_pickle=False, mmap_mode=mode)
    labels = np.load(root / "labels.npy", allow_pickle=False, mmap_mode=mode).astype(np.int32, copy=False)
    if images.ndim != 4 or images.dtype != np.uint8 or labels.shape != (images.shape[0],):
        raise DatasetError(f"dataset {root}: expected uint8 NHWC images and N labels, got {images.shape} {images.dtype}")
    return Dataset(images=images, labels=labels, sha256=sha256)


def load_dataset(folder: str | Path, expected_sha256: str | None = None, mmap: bool = False) -> Dataset:
    """Load a split, hashing exactly the bytes read; raise DatasetError on any mismatch.

    ``mmap``: map the arrays read-only instead of reading them into memory (processes on one
    host then share the pages; each copies out only what it uses)."""
    root = Path(folder)
    _check_files(root)
    return map_split(root, _verified(root, split_sha256(root), expected_sha256), mmap)


class SplitHash:
    """The split's sha256, read on a thread of its own while the engine sets up (hashlib and file reads
    release the GIL): a 4.6 GB split costs its hash's seconds once, beside the framework's import and
    compile, instead of before them. :meth:`verified` waits for it and checks it against the spec's; the
    engine calls it before its first step, so the hash never runs beside a measured one."""

    def __init__(self, folder: str | Path) -> None:
        self.root = Path(folder)
        self.hash_s = 0.0  # the hash's own time (overlapped with the setup)
        self.wait_s = 0.0  # the time :meth:`verified` waited for it
        self._sha: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, name="bench-split-hash", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        start = time.perf_counter()
        try:
            self._sha = split_sha256(self.root)
        except BaseException as exc:  # re-raised in the caller's thread by verified()
            self._error = exc
        self.hash_s = time.perf_counter() - start

    def verified(self, expected_sha256: str | None) -> str:
        """The read-back hash, once the thread has read every byte; DatasetError if it differs from the spec's."""
        start = time.perf_counter()
        self._thread.join()
        self.wait_s = time.perf_counter() - start
        if self._error is not None:
            raise DatasetError(f"dataset {self.root}: could not be hashed: {self._error}") from self._error
        assert self._sha is not None
        return _verified(self.root, self._sha, expected_sha256)


def normalize_formula(images_uint8: np.ndarray) -> np.ndarray:
    """The preprocessing's definition: uint8 -> float32 ``x / 127.5 - 1`` (in [-1, 1]), computed in float32."""
    return (images_uint8.astype(np.float32) / 127.5) - 1.0


# the 256 values the definition gives, looked up instead of computed: the same bits, several times
# faster on large splits (an ImageNet-size split of 30,720 images spent most of an engine's setup here)
NORMALIZED = normalize_formula(np.arange(256, dtype=np.uint8))
NORMALIZED.setflags(write=False)


def normalize(images_uint8: np.ndarray) -> np.ndarray:
    """uint8 NHWC -> float32 NHWC in [-1, 1]; the same preprocessing in every engine (:func:`normalize_formula`'s
    bits, by table lookup)."""
    if images_uint8.dtype != np.uint8:
        raise DatasetError(f"normalize expects uint8 images, got {images_uint8.dtype}")
    return NORMALIZED[images_uint8]


def check_dataset(parity: Parity, data: Dataset) -> tuple[int, int, int]:
    """The split must have the spec's geometry (HWC), sample count and label range; returns the geometry."""
    expected = parity.input.hwc
    if tuple(data.images.shape[1:]) != expected:
        raise DatasetError(f"dataset images are {tuple(data.images.shape[1:])} (HWC), the spec says {expected}")
    if data.samples != parity.dataset.samples:
        raise DatasetError(f"dataset has {data.samples} samples, the spec says {parity.dataset.samples}")
    classes = parity.num_classes
    if data.samples and (int(np.min(data.labels)) < 0 or int(np.max(data.labels)) >= classes):
        raise DatasetError(f"dataset labels fall outside 0..{classes - 1}")
    return expected
