"""Real dataset sources for scenarios: ``prepared`` (the cache of ``bench data prepare``) or a
path/URL of the dataset's archive or folder (prepared on the fly, then cached the same way).

``workload.dataset.samples`` on real data takes the first N samples of the split (in the
dataset's canonical order); that subset is a canonical split of its own with its own hash.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.data.fetch import normalize_sha256, split_fragment
from orchestrator.data.registry import DatasetInfo, get_dataset
from orchestrator.data.store import (
    PreparedRecord,
    PreparedSplit,
    SplitEntry,
    class_counts,
    dataset_cache_root,
    find_cached,
    first_samples,
    geometry_tag,
    prepare_synthetic,
    prepared_records,
    prepared_split,
    read_meta,
    read_prepared,
    synthetic_stem,
)
from orchestrator.errors import BadInput


def find_prepared(info: DatasetInfo, geometry: tuple[int, int, int]) -> PreparedRecord:
    """The prepared record of ``info`` at ``geometry``; BadInput telling how to prepare it if absent."""
    record = read_prepared(info.name, geometry)
    if record is not None:
        return record
    others = [geometry_tag(r.geometry) for r in prepared_records(info.name)]
    source_part = " --source FOLDER" if info.default_source is None else ""
    size_part = "" if info.fixed_geometry or geometry == info.geometry else f" --size {geometry[0]}x{geometry[1]}"
    hint = f"run `bench data prepare {info.name}{source_part}{size_part}`"
    if others:
        raise BadInput(f"workload.dataset.source: {info.name} is prepared at {', '.join(others)}, not at the scenario's "
                       f"workload.input {geometry_tag(geometry)}; {hint}")
    raise BadInput(f"workload.dataset.source: {info.name} is not prepared; {hint} first")


def prepare_from_source(name: str, source: str, split: str, samples: int | None, geometry: tuple[int, int, int] = (32, 32, 3),
                        num_classes: int | None = None) -> PreparedSplit:
    """The split a scenario names, from the cache (``prepared``) or prepared now from a path/URL."""
    info = get_dataset(name, "workload.dataset.name")
    geometry = tuple(int(v) for v in geometry)
    if source == "prepared":
        if info.fixed_geometry and geometry != info.geometry:
            raise BadInput(f"workload.input: {info.name} images are {geometry_tag(info.geometry)}, the scenario asks for "
                           f"{geometry_tag(geometry)} (use source 'synthetic' for other geometries)")
        record = find_prepared(info, geometry)
    else:
        record = info.prepare(source, None, geometry, samples if info.partial else None)
    if num_classes is not None and record.num_classes > num_classes:
        raise BadInput(f"workload.model.num_classes: {num_classes}, but {info.name} has {record.num_classes} classes")
    return first_samples(prepared_split(record, split), samples)


def prepared_facts(record: PreparedRecord) -> dict[str, Any]:
    """What ``bench data prepare --json`` prints about a prepared record."""
    root = dataset_cache_root() / record.name
    names = record.names()
    splits = {split: {"path": str(root / entry.folder), "sha256": entry.sha256, "samples": entry.samples}
              for split, entry in record.splits.items()}
    return {
        "name": record.name,
        "path": str(root),
        "sha256": record.source.get("sha256"),
        "synthetic": record.synthetic,
        "cached": record.cached,
        "geometry": list(record.geometry),
        "num_classes": record.num_classes,
        "source": record.source,
        "samples": {split: entry.samples for split, entry in record.splits.items()},
        "class_counts": {split: dict(zip(names, entry.class_counts, strict=True)) for split, entry in record.splits.items()},
        "splits": splits,
    }


def prepare_named(name: str, source: str | None = None, sha256: str | None = None, geometry: tuple[int, int, int] | None = None,
                  samples: int | None = None, seed: int = 0) -> dict[str, Any]:
    """``bench data prepare``: prepare (or find cached) every split of ``name``; returns :func:`prepared_facts`' document."""
    info = get_dataset(name, "dataset", synthetic=source == "synthetic")
    geometry = tuple(geometry or info.geometry)
    if sha256 is not None:
        sha256 = normalize_sha256(sha256)
    if source != "synthetic":
        return prepared_facts(info.prepare(source, sha256, geometry, samples))
    if sha256:
        raise BadInput("--sha256: a synthetic dataset has no archive to check")
    cached = True
    splits: dict[str, SplitEntry] = {}
    for split, default in info.synthetic_samples.items():
        count = samples or default
        stem = synthetic_stem(split, geometry, info.num_classes, count, seed)
        cached = cached and find_cached(dataset_cache_root() / name, stem) is not None
        prepared = prepare_synthetic(name, split, count, geometry, info.num_classes, seed)
        meta = read_meta(prepared.path)
        counts = (meta.class_counts if meta is not None else None) or class_counts(np.load(prepared.path / "labels.npy"), info.num_classes)
        splits[split] = SplitEntry(prepared.path.name, prepared.sha256, prepared.samples, tuple(counts))
    return prepared_facts(PreparedRecord(name, tuple(geometry), info.num_classes, True, {"kind": "synthetic", "seed": seed}, splits, cached=cached))


def check_workload_dataset(workload: dict[str, Any], where: str = "workload") -> None:
    """Scenario-time checks of ``workload.dataset`` that need no data (for ``bench scenario validate``):
    a known name for non-synthetic sources, a fixed-geometry dataset's geometry, its class count."""
    dataset = workload["dataset"]
    source = dataset["source"]
    if source == "synthetic":
        return
    info = get_dataset(dataset["name"], f"{where}.dataset.name")
    geometry = (workload["input"]["height"], workload["input"]["width"], workload["input"]["channels"])
    if info.fixed_geometry and tuple(geometry) != info.geometry:
        raise BadInput(f"{where}.input: {info.name} images are {geometry_tag(info.geometry)}, the scenario asks for "
                       f"{geometry_tag(geometry)} (use source 'synthetic' for other geometries)")
    if info.fixed_geometry and workload["model"]["num_classes"] < info.num_classes:
        raise BadInput(f"{where}.model.num_classes: {workload['model']['num_classes']}, but {info.name} has {info.num_classes} classes")
    if source != "prepared":
        split_fragment(source)


def prepare_split(name: str, source: str, split: str, samples: int | None, geometry: tuple[int, int, int], num_classes: int, seed: int) -> PreparedSplit:
    """Prepare (or reuse from the cache) one split of a dataset in canonical form.

    ``source``: ``synthetic`` (seeded, any name and geometry), ``prepared`` (what ``bench data
    prepare NAME`` cached), or a path/URL of the dataset's archive or folder (prepared on the fly).
    For real data ``samples`` takes the first N samples of the split.
    """
    if source != "synthetic":
        return prepare_from_source(name, source, split, samples, geometry, num_classes)
    if samples is None:
        raise BadInput(f"workload.dataset.samples: required for a synthetic dataset ({name})")
    return prepare_synthetic(name, split, samples, tuple(geometry), num_classes, seed)
