"""Synthetic data: streamed generation equals the one-shot definition; ImageNet geometry; the CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from bench_engine.data import split_sha256
from orchestrator.data.sources import prepare_split
from orchestrator.data.splitmeta import SplitDescription
from orchestrator.data.store import SplitWriter, write_canonical
from orchestrator.data.synthetic import chunk_rows, fill_synthetic, synthetic_split


def canonical_sha(images: np.ndarray, labels: np.ndarray) -> str:
    """The rule of images/common/bench_engine/data.py, computed from np.save's bytes."""
    import hashlib

    digest = hashlib.sha256()
    for array in (images, labels):
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        digest.update(buffer.getvalue())
    return digest.hexdigest()


@pytest.mark.parametrize("rows", [8, 16, 64])
@pytest.mark.parametrize("geometry", [(32, 32, 3), (7, 5, 1), (3, 3, 3)])
def test_streamed_generation_equals_one_shot(tmp_path, geometry, rows):
    images, labels = synthetic_split(37, *geometry, 10, 5)
    with SplitWriter(tmp_path, "s", 37, geometry) as writer:
        fill_synthetic(writer, 10, 5, rows=rows)
        folder, sha = writer.seal(SplitDescription("x", "train", False, 10))
    assert sha == canonical_sha(images, labels) == split_sha256(folder)
    np.testing.assert_array_equal(np.load(folder / "images.npy"), images)
    np.testing.assert_array_equal(np.load(folder / "labels.npy"), labels)


def test_chunk_rows_are_multiples_of_8(tmp_path):
    assert chunk_rows(224 * 224 * 3) % 8 == 0 and chunk_rows(224 * 224 * 3) * 224 * 224 * 3 <= 64 << 20
    assert chunk_rows(10**9) == 8
    with SplitWriter(tmp_path, "odd", 16, (2, 2, 3)) as writer, pytest.raises(ValueError, match="multiple of 8"):
        fill_synthetic(writer, 10, 0, rows=5)


def test_write_canonical_matches_np_save(tmp_path):
    images, labels = synthetic_split(10, 4, 4, 3, 3, 1)
    folder, sha = write_canonical(tmp_path, "w", images, labels, SplitDescription("x", "test", False))
    assert sha == canonical_sha(images, labels)
    assert (folder / "images.npy").read_bytes() == _npy_bytes(images)


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def test_imagenet_geometry_seeded_and_hashed(cache):
    split = prepare_split("imagenet", "synthetic", "train", 24, (224, 224, 3), 1000, 0)
    images, labels = synthetic_split(24, 224, 224, 3, 1000, 0)
    assert split.sha256 == canonical_sha(images, labels)
    assert np.load(split.path / "images.npy", mmap_mode="r").shape == (24, 224, 224, 3)
    meta = json.loads((split.path / "dataset.json").read_text())
    assert meta["num_classes"] == 1000 and meta["shape"] == [224, 224, 3] and sum(meta["class_counts"]) == 24
    assert prepare_split("imagenet", "synthetic", "train", 24, (224, 224, 3), 1000, 0) == split  # cached
    assert prepare_split("imagenet", "synthetic", "train", 24, (224, 224, 3), 1000, 1).sha256 != split.sha256  # seeded


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), SplitWriter(tmp_path, "boom", 4, (2, 2, 3)) as writer:
        writer.write(np.zeros((2, 2, 2, 3), np.uint8))
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with SplitWriter(tmp_path, "short", 4, (2, 2, 3)) as writer, pytest.raises(ValueError, match="2 of 4 rows"):
        writer.write(np.zeros((2, 2, 2, 3), np.uint8))
        writer.seal(SplitDescription("x", "test", False))


def test_cli_prepare_synthetic_imagenet(bench, cache):
    result = bench("data", "prepare", "imagenet", "--source", "synthetic", "--samples", "16", "--size", "64", "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["synthetic"] is True and doc["geometry"] == [64, 64, 3] and doc["num_classes"] == 1000
    assert doc["samples"] == {"train": 16, "test": 16}
    assert sum(doc["class_counts"]["train"].values()) == 16
    train = Path(doc["splits"]["train"]["path"])
    # the same split a scenario with source synthetic, seed 0 and these sizes gets
    assert prepare_split("imagenet", "synthetic", "train", 16, (64, 64, 3), 1000, 0).path == train
    assert bench("data", "prepare", "imagenet", "--source", "synthetic", "--samples", "16", "--size", "64", "--json").json()["cached"] is True
    text = bench("data", "prepare", "cifar10", "--source", "synthetic", "--samples", "8")
    assert text.code == 0 and "prepared" in text.stdout and "synthetic" in text.stdout
