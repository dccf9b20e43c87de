"""The dataset cache: canonical split folders named by their content hash.

Layout under the cache root (``$BENCH_DATA_DIR`` or ``~/.cache/bench/datasets``)::

    <name>/<stem>-<sha12>/{images.npy,labels.npy,dataset.json}   one split in canonical form
    <name>/prepared-<H>x<W>x<C>.json                              what `bench data prepare` made
    _downloads/                                                   archives fetched from a URL

``images.npy`` is uint8 N x H x W x C, ``labels.npy`` int32 N; the split's sha256 is that of the
bytes of ``images.npy`` followed by those of ``labels.npy`` (the rule of
``images/common/bench_engine/data.py``). Splits are written to a
temporary folder, then renamed: a split is either complete or absent. Splits are written and hashed
as a stream of chunks, so a large one (10,000 x 224x224x3 = 1.5 GB) never sits in memory.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npformat

from bench_engine.data import CANONICAL_FILES
from orchestrator.data.splitmeta import SplitDescription, SplitMeta
from orchestrator.data.synthetic import fill_synthetic
from orchestrator.errors import BadInput

META_FILE = "dataset.json"
DOWNLOADS = "_downloads"
_COPY_BYTES = 64 << 20


@dataclass(frozen=True)
class PreparedSplit:
    name: str
    split: str
    path: Path
    sha256: str
    samples: int
    synthetic: bool


@dataclass(frozen=True)
class SplitEntry:
    """One split of a prepared record: its folder under ``<cache>/<name>/``, hash, size and class counts."""

    folder: str
    sha256: str
    samples: int
    class_counts: tuple[int, ...] = ()

    def to_json(self) -> dict[str, str | int | list[int]]:
        return {"folder": self.folder, "sha256": self.sha256, "samples": self.samples, "class_counts": list(self.class_counts)}


@dataclass(frozen=True)
class PreparedRecord:
    """What ``bench data prepare NAME`` made at one geometry (``<name>/prepared-<H>x<W>x<C>.json``):
    the dataset's splits and where they came from (``source``, the file's own JSON object).
    ``cached``: found in the cache rather than prepared now (never written to the file)."""

    name: str
    geometry: tuple[int, ...]
    num_classes: int
    synthetic: bool
    source: dict[str, Any]
    splits: dict[str, SplitEntry]
    class_names: tuple[str, ...] | None = None
    prepared_at: str | None = None
    cached: bool = False

    @classmethod
    def from_json(cls, doc: Any) -> PreparedRecord:
        """A record read from its file; ValueError when it is not one."""
        try:
            splits = {name: SplitEntry(str(e["folder"]), str(e["sha256"]), int(e["samples"]), tuple(e.get("class_counts") or ()))
                      for name, e in doc["splits"].items()}
            names = doc.get("class_names")
            return cls(str(doc["name"]), tuple(int(v) for v in doc["geometry"]), int(doc["num_classes"]), bool(doc.get("synthetic", False)),
                       dict(doc.get("source") or {}), splits, tuple(names) if names is not None else None, doc.get("prepared_at"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a prepared record ({exc.__class__.__name__}: {exc})") from None

    def to_json(self) -> dict[str, Any]:
        """The file's document (the keys in the order bench has always written them)."""
        return {"name": self.name, "geometry": list(self.geometry), "num_classes": self.num_classes,
                **({"class_names": list(self.class_names)} if self.class_names is not None else {}),
                "synthetic": self.synthetic, "source": self.source,
                **({"prepared_at": self.prepared_at} if self.prepared_at is not None else {}),
                "splits": {name: entry.to_json() for name, entry in self.splits.items()}}

    def names(self) -> list[str]:
        """The class names (the class indices as text where the dataset has none)."""
        return list(self.class_names or [str(i) for i in range(self.num_classes)])


def dataset_cache_root() -> Path:
    return Path(os.environ.get("BENCH_DATA_DIR") or Path.home() / ".cache" / "bench" / "datasets")


def geometry_tag(geometry: tuple[int, int, int] | list[int]) -> str:
    return "x".join(str(int(v)) for v in geometry)






def class_counts(labels: np.ndarray, num_classes: int) -> list[int]:
    return [int(v) for v in np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes)[:num_classes]]


def _check_room(parent: Path, stem: str, needed: int) -> None:
    """BadInput (before anything is allocated or written) when the split cannot fit on the cache's disk."""
    free = shutil.disk_usage(parent).free
    if needed > free:
        raise BadInput(f"{stem}: needs {needed / 1e9:,.1f} GB, only {free / 1e9:,.1f} GB free in {parent} "
                       "(fewer samples, or another $BENCH_DATA_DIR)")


class SplitWriter:
    """Write one canonical split sequentially: :meth:`write` image chunks in order, set ``labels``,
    then :meth:`seal`. Bytes are hashed as they are written and never held twice in memory.

    Used as a context manager; leaving it by an exception removes the temporary folder.
    """

    def __init__(self, parent: Path, stem: str, samples: int, shape: tuple[int, ...]) -> None:
        if samples < 1:
            raise BadInput(f"a dataset split needs at least one sample ({stem})")
        parent.mkdir(parents=True, exist_ok=True)
        _check_room(parent, stem, samples * (math.prod(int(v) for v in shape) + 4))
        self.parent, self.stem = parent, stem
        self.samples, self.shape = samples, tuple(int(v) for v in shape)
        self.labels = np.zeros(samples, dtype=np.int32)
        self.written = 0
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.", dir=parent))
        self._digest = hashlib.sha256()
        self._images = open(self.tmp / "images.npy", "wb")
        self._put(self._images, _npy_header(np.uint8, (samples, *self.shape)))

    def __enter__(self) -> SplitWriter:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            self.abort()

    def _put(self, handle, data) -> None:
        handle.write(data)
        self._digest.update(data)

    def write(self, images: np.ndarray) -> None:
        """Append the next rows (k x H x W x C, cast to uint8)."""
        if tuple(images.shape[1:]) != self.shape:
            raise ValueError(f"rows of shape {images.shape[1:]} written to a split of {self.shape}")
        if self.written + images.shape[0] > self.samples:
            raise ValueError("more rows than the split holds")
        self._put(self._images, memoryview(np.ascontiguousarray(images, dtype=np.uint8)).cast("B"))
        self.written += images.shape[0]

    def abort(self) -> None:
        self._images.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def seal(self, about: SplitDescription) -> tuple[Path, str]:
        """Close, write labels and dataset.json (class counts made here when ``about`` has a class count
        but none), move the split to ``<stem>-<sha12>``; return (folder, sha256)."""
        if self.written != self.samples:
            raise ValueError(f"{self.written} of {self.samples} rows written")
        self._images.close()
        buffer = io.BytesIO()
        np.save(buffer, self.labels, allow_pickle=False)
        with open(self.tmp / "labels.npy", "wb") as handle:
            self._put(handle, buffer.getvalue())
        sha = self._digest.hexdigest()
        sealed = None
        if about.num_classes is not None and about.class_counts is None:
            sealed = tuple(class_counts(self.labels, about.num_classes))
        meta = SplitMeta(about, sha, self.samples, self.shape, sealed)
        (self.tmp / META_FILE).write_text(json.dumps(meta.to_json(), indent=2) + "\n")
        final = self.parent / f"{self.stem}-{sha[:12]}"
        if final.exists():
            shutil.rmtree(self.tmp)
        else:
            os.replace(self.tmp, final)
        return final, sha


def _npy_header(dtype, shape: tuple[int, ...]) -> bytes:
    """The .npy header np.save writes for a C-ordered array of ``dtype`` and ``shape``."""
    buffer = io.BytesIO()
    npformat.write_array_header_1_0(buffer, {"descr": npformat.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


def _read_rows(path: Path, rows: int, chunk_rows: int):
    """Yield the first ``rows`` rows of a C-ordered .npy file in chunks, reading the file sequentially."""
    with open(path, "rb") as handle:
        version = npformat.read_magic(handle)
        reader = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
        shape, fortran, dtype = reader(handle)
        if fortran:
            raise BadInput(f"{path}: Fortran-ordered arrays are not canonical")
        row_shape = tuple(shape[1:])
        row_bytes = int(np.prod(row_shape)) * dtype.itemsize
        done = 0
        while done < rows:
            count = min(chunk_rows, rows - done)
            data = handle.read(count * row_bytes)
            if len(data) != count * row_bytes:
                raise BadInput(f"{path} is truncated; prepare the dataset again")
            yield np.frombuffer(data, dtype=dtype).reshape(count, *row_shape)
            done += count


def write_canonical(target_parent: Path, stem: str, images: np.ndarray, labels: np.ndarray, about: SplitDescription) -> tuple[Path, str]:
    """Write a split from arrays atomically (temporary folder, then rename); return its folder and sha256."""
    with SplitWriter(target_parent, stem, int(labels.shape[0]), tuple(images.shape[1:])) as writer:
        writer.write(images)
        writer.labels[:] = labels
        return writer.seal(about)


def read_meta(folder: Path) -> SplitMeta | None:
    """The metadata of a complete split folder (None: incomplete, or no readable dataset.json)."""
    meta_file = folder / META_FILE
    if not (folder.is_dir() and meta_file.is_file() and all((folder / n).is_file() for n in CANONICAL_FILES)):
        return None
    try:
        return SplitMeta.from_json(json.loads(meta_file.read_text()))
    except ValueError:
        return None


def split_of(folder: Path, meta: SplitMeta) -> PreparedSplit:
    return PreparedSplit(meta.about.name, meta.about.split, folder, meta.sha256, meta.samples, meta.about.synthetic)


def find_cached(parent: Path, stem: str) -> PreparedSplit | None:
    if not parent.is_dir():
        return None
    for folder in sorted(parent.glob(f"{stem}-*")):
        if folder.name[len(stem) + 1:].isalnum():
            meta = read_meta(folder)
            if meta is not None:
                return split_of(folder, meta)
    return None




def load_split(folder: Path) -> PreparedSplit:
    meta = read_meta(folder)
    if meta is None:
        raise BadInput(f"dataset split {folder} is missing or incomplete; prepare it again with `bench data prepare`")
    return split_of(folder, meta)


@dataclass(frozen=True)
class CachedSplit:
    """A complete split in the cache: its metadata, its folder, and whether a prepared record points at it."""

    meta: SplitMeta
    path: Path
    prepared: bool


def list_splits(root: Path | None = None) -> list[CachedSplit]:
    """Every complete split in the cache."""
    root = root or dataset_cache_root()
    rows: list[CachedSplit] = []
    if not root.is_dir():
        return rows
    for dataset in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        pointed = {entry.folder for record in prepared_records(dataset.name) for entry in record.splits.values()}
        for folder in sorted(p for p in dataset.iterdir() if p.is_dir() and not p.name.startswith(".")):
            meta = read_meta(folder)
            if meta is not None:
                rows.append(CachedSplit(meta, folder, folder.name in pointed))
    return rows


# --- prepared records: what `bench data prepare NAME` made, per image geometry -----------------

def prepared_record_path(name: str, geometry: tuple[int, int, int] | list[int]) -> Path:
    return dataset_cache_root() / name / f"prepared-{geometry_tag(geometry)}.json"


def prepared_records(name: str) -> list[PreparedRecord]:
    """The valid prepared records of ``name`` (every split folder they name still complete)."""
    folder = dataset_cache_root() / name
    records = []
    for path in sorted(folder.glob("prepared-*.json")) if folder.is_dir() else []:
        try:
            record = PreparedRecord.from_json(json.loads(path.read_text()))
        except ValueError:
            continue
        if all(read_meta(folder / entry.folder) is not None for entry in record.splits.values()):
            records.append(record)
    return records


def read_prepared(name: str, geometry: tuple[int, int, int] | list[int]) -> PreparedRecord | None:
    path = prepared_record_path(name, geometry)
    if not path.is_file():
        return None
    for record in prepared_records(name):
        if list(record.geometry) == [int(v) for v in geometry]:
            return record
    return None


def write_prepared(record: PreparedRecord) -> Path:
    path = prepared_record_path(record.name, record.geometry)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2) + "\n")
    os.replace(tmp, path)
    return path


def prepared_split(record: PreparedRecord, split: str) -> PreparedSplit:
    entry = record.splits.get(split)
    if entry is None:
        raise BadInput(f"workload.dataset.split: the prepared {record.name} has no '{split}' split (it has: {', '.join(sorted(record.splits))})")
    return load_split(dataset_cache_root() / record.name / entry.folder)


def first_samples(full: PreparedSplit, samples: int | None) -> PreparedSplit:
    """The first ``samples`` samples of a prepared split, as a canonical split of their own (cached);
    the split itself when ``samples`` is None or all of it."""
    if samples is None or samples == full.samples:
        return full
    if samples > full.samples:
        raise BadInput(f"workload.dataset.samples: {samples} exceeds the {full.samples} samples of the prepared {full.name}/{full.split}")
    meta = read_meta(full.path)
    if meta is None:
        raise BadInput(f"dataset split {full.path} is missing or incomplete; prepare it again with `bench data prepare`")
    shape = meta.shape
    stem = f"{full.split}-{geometry_tag(shape)}-first{samples}-of-{full.sha256[:12]}"
    parent = full.path.parent
    cached = find_cached(parent, stem)
    if cached is not None:
        return cached
    labels = np.load(full.path / "labels.npy", allow_pickle=False)
    with SplitWriter(parent, stem, samples, shape) as writer:
        for rows in _read_rows(full.path / "images.npy", samples, max(1, _COPY_BYTES // max(1, int(np.prod(shape))))):
            writer.write(rows)
        writer.labels[:] = labels[:samples]
        folder, sha = writer.seal(meta.about.cut(meta))
    return PreparedSplit(full.name, full.split, folder, sha, samples, full.synthetic)


# --- synthetic ----------------------------------------------------------------------------------

def synthetic_stem(split: str, geometry: tuple[int, int, int], num_classes: int, samples: int, seed: int) -> str:
    return f"{split}-synthetic-{geometry_tag(geometry)}-c{num_classes}-n{samples}-s{seed}"


def prepare_synthetic(name: str, split: str, samples: int, geometry: tuple[int, int, int], num_classes: int, seed: int) -> PreparedSplit:
    """A seeded synthetic split (cached), generated in chunks straight into its memory-mapped file."""
    stem = synthetic_stem(split, geometry, num_classes, samples, seed)
    parent = dataset_cache_root() / name
    cached = find_cached(parent, stem)
    if cached is not None:
        return cached
    with SplitWriter(parent, stem, samples, tuple(geometry)) as writer:
        fill_synthetic(writer, num_classes, seed)
        folder, sha = writer.seal(SplitDescription(name, split, True, num_classes, seed))
    return PreparedSplit(name, split, folder, sha, samples, True)
