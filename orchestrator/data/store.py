"""The dataset cache: canonical split folders named by their content hash.

Layout: ``<cache>/<name>/<split>-<geometry>-<samples>-<sha12>/{images.npy,labels.npy,dataset.json}``.
The cache root is ``$BENCH_DATA_DIR`` or ``~/.cache/bench/datasets``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orchestrator.data.synthetic import synthetic_split
from orchestrator.errors import BadInput

CANONICAL_FILES = ("images.npy", "labels.npy")


@dataclass(frozen=True)
class PreparedSplit:
    name: str
    split: str
    path: Path
    sha256: str
    samples: int
    synthetic: bool


def dataset_cache_root() -> Path:
    return Path(os.environ.get("BENCH_DATA_DIR") or Path.home() / ".cache" / "bench" / "datasets")


def _hash_files(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in CANONICAL_FILES:
        with open(folder / name, "rb") as handle:
            while chunk := handle.read(8 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def write_canonical(target_parent: Path, stem: str, images: np.ndarray, labels: np.ndarray, meta: dict) -> tuple[Path, str]:
    """Write a split atomically (temporary folder, then rename); return its folder and sha256."""
    target_parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.", dir=target_parent))
    try:
        np.save(tmp / "images.npy", np.ascontiguousarray(images, dtype=np.uint8), allow_pickle=False)
        np.save(tmp / "labels.npy", np.ascontiguousarray(labels, dtype=np.int32), allow_pickle=False)
        sha = _hash_files(tmp)
        meta = {**meta, "sha256": sha, "samples": int(labels.shape[0]), "shape": list(images.shape[1:])}
        (tmp / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n")
        final = target_parent / f"{stem}-{sha[:12]}"
        if final.exists():
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, final)
        return final, sha
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _find_cached(parent: Path, stem: str) -> PreparedSplit | None:
    if not parent.is_dir():
        return None
    for folder in sorted(parent.glob(f"{stem}-*")):
        meta_file = folder / "dataset.json"
        if folder.is_dir() and meta_file.is_file():
            meta = json.loads(meta_file.read_text())
            return PreparedSplit(meta["name"], meta["split"], folder, meta["sha256"], meta["samples"], meta.get("synthetic", False))
    return None


def prepare_split(name: str, source: str, split: str, samples: int | None, geometry: tuple[int, int, int], num_classes: int, seed: int) -> PreparedSplit:
    """Prepare (or reuse from the cache) one split of a dataset in canonical form."""
    height, width, channels = geometry
    if source != "synthetic":
        from orchestrator.data.sources import prepare_from_source

        return prepare_from_source(name, source, split, samples)
    if samples is None:
        raise BadInput(f"workload.dataset.samples: required for a synthetic dataset ({name})")
    stem = f"{split}-synthetic-{height}x{width}x{channels}-c{num_classes}-n{samples}-s{seed}"
    parent = dataset_cache_root() / name
    cached = _find_cached(parent, stem)
    if cached is not None:
        return cached
    images, labels = synthetic_split(samples, height, width, channels, num_classes, seed)
    meta = {"name": name, "split": split, "synthetic": True, "seed": seed, "num_classes": num_classes}
    folder, sha = write_canonical(parent, stem, images, labels, meta)
    return PreparedSplit(name, split, folder, sha, samples, True)
