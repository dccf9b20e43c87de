"""A tiny archive in the official CIFAR-10 python layout, built by the tests themselves (no download)."""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TOP = "cifar-10-batches-py"
LABEL_NAMES = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]


@dataclass
class Fixture:
    path: Path
    sha256: str
    train_rows: np.ndarray  # N x 3072, channel-planar, as in the archive
    train_labels: np.ndarray
    test_rows: np.ndarray
    test_labels: np.ndarray


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def batch_members(per_batch: int = 20, seed: int = 0) -> tuple[dict[str, bytes], dict[str, np.ndarray]]:
    """The member bytes of the official layout (pickle protocol 2, bytes keys, numpy uint8 data)."""
    rng = np.random.default_rng(seed)
    members: dict[str, bytes] = {}
    arrays: dict[str, np.ndarray] = {}
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for index, name in enumerate(names):
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = [int(v) for v in (np.arange(per_batch) * 3 + index) % 10]
        document = {b"batch_label": f"batch {name}".encode(), b"labels": labels, b"data": data,
                    b"filenames": [f"{name}_{i}.png".encode() for i in range(per_batch)]}
        members[f"{TOP}/{name}"] = pickle.dumps(document, protocol=2)
        arrays[name] = data
        arrays[name + ".labels"] = np.asarray(labels, dtype=np.int32)
    members[f"{TOP}/batches.meta"] = pickle.dumps({b"num_cases_per_batch": per_batch, b"label_names": LABEL_NAMES, b"num_vis": 3072}, protocol=2)
    members[f"{TOP}/readme.html"] = b"<html>fixture</html>"
    return members, arrays


def write_tar(path: Path, members: dict[str, bytes], extra: list[tarfile.TarInfo] | None = None, first: bool = False) -> Path:
    """A .tar.gz with a folder entry, ``members`` as regular files, and ``extra`` raw entries (links...)."""
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        folder = tarfile.TarInfo(TOP)
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        if first:
            for info in extra or []:
                tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        if not first:
            for info in extra or []:
                tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return path


def make_cifar_archive(folder: Path, per_batch: int = 20, name: str = "cifar-10-python.tar.gz") -> Fixture:
    members, arrays = batch_members(per_batch)
    path = write_tar(folder / name, members)
    train = [f"data_batch_{i}" for i in range(1, 6)]
    return Fixture(
        path=path,
        sha256=sha256_of(path),
        train_rows=np.concatenate([arrays[n] for n in train]),
        train_labels=np.concatenate([arrays[n + ".labels"] for n in train]),
        test_rows=arrays["test_batch"],
        test_labels=arrays["test_batch.labels"],
    )


def to_nhwc(rows: np.ndarray) -> np.ndarray:
    """Independent reference conversion: R plane, G plane, B plane per row -> N x 32 x 32 x 3."""
    out = np.empty((rows.shape[0], 32, 32, 3), dtype=np.uint8)
    for channel in range(3):
        out[..., channel] = rows[:, channel * 1024:(channel + 1) * 1024].reshape(-1, 32, 32)
    return out
