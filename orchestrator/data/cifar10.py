"""CIFAR-10 from the official python archive ``cifar-10-python.tar.gz``.

The archive holds ``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``: pickled dicts
with bytes keys; ``b'data'`` is N x 3072 uint8, each row channel-planar (1024 red, 1024 green,
1024 blue values, row-major 32x32), ``b'labels'`` N ints in 0..9, and ``batches.meta`` has
``b'label_names'``. The archive is verified, then its members are read straight from the tar stream
(nothing is extracted) and unpickled with an unpickler that only admits numpy arrays, so even a
hostile archive with a matching ``--sha256`` cannot run code. Train = data_batch_1..5 in order
(50,000), test = test_batch (10,000); images become NHWC uint8.
"""

from __future__ import annotations

import importlib
import io
import pickle
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.data.fetch import download, is_url, read_tar_members, split_fragment, verify_checksum
from orchestrator.data.splitmeta import ArchiveMembers, SplitDescription
from orchestrator.data.store import (
    DOWNLOADS,
    PreparedRecord,
    SplitEntry,
    SplitWriter,
    class_counts,
    dataset_cache_root,
    geometry_tag,
    read_prepared,
    write_prepared,
)
from orchestrator.errors import BadInput

ARCHIVE_NAME = "cifar-10-python.tar.gz"
# sha256 of the official cifar-10-python.tar.gz (170,498,071 bytes), as pinned by TensorFlow/Keras:
# github.com/tensorflow/tensorflow, tensorflow/python/keras/datasets/cifar10.py,
# get_file('cifar-10-batches-py', origin='https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz',
# file_hash='6d958be0...'). The dataset page (https://www.cs.toronto.edu/~kriz/cifar.html) publishes
# only the md5 below; the official archive is checked against both.
OFFICIAL_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
OFFICIAL_MD5 = "c58f30108f718f92721af3b95e74349a"

TOP = "cifar-10-batches-py"
SPLIT_MEMBERS = {
    "train": [f"{TOP}/data_batch_{i}" for i in range(1, 6)],
    "test": [f"{TOP}/test_batch"],
}
META_MEMBER = f"{TOP}/batches.meta"
SIDE, CHANNELS, CLASSES = 32, 3, 10
ROW = SIDE * SIDE * CHANNELS


def _reconstruct():
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return importlib.import_module(module)._reconstruct
        except (ImportError, AttributeError):
            continue
    raise ImportError("numpy's array unpickling helper is not found")


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"codec {encoding!r} is not allowed")
    return text.encode("latin1")


class _ArrayUnpickler(pickle.Unpickler):
    """Admits plain containers and numpy arrays only: no other global can be loaded."""

    def find_class(self, module: str, name: str) -> Any:
        if name == "_reconstruct" and module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            return _reconstruct()
        if module == "numpy" and name in ("ndarray", "dtype"):
            return getattr(np, name)
        if (module, name) == ("_codecs", "encode"):
            return _latin1_encode
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")


def _unpickle(raw: bytes, member: str) -> dict[Any, Any]:
    try:
        document = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as exc:  # any failure of a hostile or broken pickle is bad input
        raise BadInput(f"member {member} is not a CIFAR-10 pickle ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(document, dict):
        raise BadInput(f"member {member} is not a CIFAR-10 pickle (a {type(document).__name__}, not a dict)")
    return document


def _get(document: dict[Any, Any], key: str, member: str) -> Any:
    for candidate in (key.encode(), key):
        if candidate in document:
            return document[candidate]
    raise BadInput(f"member {member} has no '{key}' entry")


def _batch(raw: bytes, member: str) -> tuple[np.ndarray, np.ndarray]:
    document = _unpickle(raw, member)
    data = np.asarray(_get(document, "data", member))
    labels = np.asarray(_get(document, "labels", member))
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != ROW:
        raise BadInput(f"member {member}: data is {data.dtype} {data.shape}, expected uint8 N x {ROW}")
    if labels.ndim != 1 or labels.shape[0] != data.shape[0] or not np.issubdtype(labels.dtype, np.integer):
        raise BadInput(f"member {member}: {labels.shape} labels for {data.shape[0]} images")
    if labels.size and (labels.min() < 0 or labels.max() >= CLASSES):
        raise BadInput(f"member {member}: labels outside 0..{CLASSES - 1}")
    return data, labels.astype(np.int32)


def _label_names(raw: bytes) -> list[str]:
    names = _get(_unpickle(raw, META_MEMBER), "label_names", META_MEMBER)
    if not isinstance(names, list) or len(names) != CLASSES:
        raise BadInput(f"member {META_MEMBER}: expected {CLASSES} label names")
    return [n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n) for n in names]


def _archive_path(location: str, sha256: str) -> Path:
    """A local copy of the archive: the path itself, or a (cached) download of the URL."""
    if is_url(location):
        name = Path(location.rsplit("/", 1)[-1] or ARCHIVE_NAME).name
        dest = dataset_cache_root() / DOWNLOADS / f"{sha256[:12]}-{name}"
        if dest.is_file():
            return dest
        return download(location, dest, sha256)
    path = Path(location).expanduser()
    if path.is_dir():
        raise BadInput(f"dataset source {location}: is a folder; cifar10 needs the archive {ARCHIVE_NAME}")
    if not path.is_file():
        raise BadInput(f"dataset source {location}: no such file")
    return path


def prepare(info, source: str | None, sha256: str | None, geometry: tuple[int, int, int], samples: int | None) -> PreparedRecord:
    """Verify, read and convert the archive once; later calls with the same checksum reuse the cache."""
    if samples is not None:
        raise BadInput("--samples: the CIFAR-10 archive is converted whole; a scenario takes the first N samples with workload.dataset.samples")
    location, pinned = split_fragment(source or info.default_source)
    if sha256 and pinned and sha256 != pinned:
        raise BadInput(f"--sha256 {sha256} contradicts the source's #sha256={pinned}")
    expected = sha256 or pinned or OFFICIAL_SHA256
    official = expected == OFFICIAL_SHA256
    record = read_prepared(info.name, geometry)
    if record is not None and record.source.get("sha256") == expected:
        return replace(record, cached=True)

    archive = _archive_path(location, expected)
    verify_checksum(archive, expected, OFFICIAL_MD5 if official else None)
    members = read_tar_members(archive, [*SPLIT_MEMBERS["train"], *SPLIT_MEMBERS["test"], META_MEMBER])
    label_names = _label_names(members.pop(META_MEMBER))
    parent = dataset_cache_root() / info.name
    splits: dict[str, SplitEntry] = {}
    for split, names in SPLIT_MEMBERS.items():
        batches = [_batch(members.pop(name), name) for name in names]
        total = sum(labels.shape[0] for _, labels in batches)
        if total == 0:
            raise BadInput(f"archive {archive}: the {split} split has no samples")
        stem = f"{split}-real-{geometry_tag(geometry)}-n{total}-a{expected[:12]}"
        with SplitWriter(parent, stem, total, (SIDE, SIDE, CHANNELS)) as writer:
            offset = 0
            for data, labels in batches:
                count = labels.shape[0]
                writer.write(data.reshape(count, CHANNELS, SIDE, SIDE).transpose(0, 2, 3, 1))  # channel-planar rows -> NHWC
                writer.labels[offset:offset + count] = labels
                offset += count
            counts = class_counts(writer.labels, CLASSES)
            folder, split_sha = writer.seal(SplitDescription(
                info.name, split, False, CLASSES, class_names=tuple(label_names), class_counts=tuple(counts),
                source=ArchiveMembers(expected, tuple(names))))
        splits[split] = SplitEntry(folder.name, split_sha, total, tuple(counts))
        del batches
    record = PreparedRecord(
        name=info.name,
        geometry=tuple(geometry),
        num_classes=CLASSES,
        class_names=tuple(label_names),
        synthetic=False,
        source={
            "kind": "archive",
            "location": location if is_url(location) else str(Path(location).expanduser().resolve()),
            "sha256": expected,
            "verified": "sha256 and md5 of the official archive" if official else "sha256 given by the user",
        },
        prepared_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        splits=splits,
    )
    write_prepared(record)
    return record
