"""dataset.json as a typed record: each producer's document reads back to itself, key order included; the checks."""

from __future__ import annotations

import json

import pytest

from orchestrator.data.splitmeta import ArchiveMembers, FolderFiles, SplitDescription, SplitMeta, SubsetOf, source_from_json

SHA = "ab" * 32
SYNTHETIC = {"name": "x", "split": "train", "synthetic": True, "seed": 3, "num_classes": 2,
             "sha256": SHA, "samples": 5, "shape": [2, 2, 3], "class_counts": [2, 3]}
ARCHIVE = {"name": "cifar10", "split": "test", "synthetic": False, "num_classes": 2, "class_names": ["a", "b"], "class_counts": [1, 1],
           "source": {"archive_sha256": SHA, "members": ["m/test_batch"]}, "sha256": SHA, "samples": 2, "shape": [32, 32, 3]}
FOLDER = {**ARCHIVE, "source": {"folder": "/data/val", "fingerprint": SHA}}
SUBSET = {"name": "cifar10", "split": "test", "synthetic": False, "num_classes": 2, "class_names": ["a", "b"],
          "source": {"archive_sha256": SHA, "members": ["m/test_batch"]}, "subset_of": {"sha256": SHA, "samples": 2, "rule": "first N samples"},
          "sha256": SHA, "samples": 1, "shape": [32, 32, 3], "class_counts": [1, 0]}


@pytest.mark.parametrize("doc", [SYNTHETIC, ARCHIVE, FOLDER, SUBSET], ids=["synthetic", "archive", "folder", "subset"])
def test_documents_read_back_to_themselves(doc):
    meta = SplitMeta.from_json(json.loads(json.dumps(doc)))
    assert json.dumps(meta.to_json()) == json.dumps(doc)  # keys, order and values
    assert meta.class_counts == tuple(doc["class_counts"])


def test_sources_and_the_cut():
    assert isinstance(SplitMeta.from_json(ARCHIVE).about.source, ArchiveMembers)
    assert SplitMeta.from_json(FOLDER).about.source == FolderFiles("/data/val", SHA)
    full = SplitMeta.from_json(ARCHIVE)
    cut = full.about.cut(full)
    assert cut.class_counts is None and cut.subset_of == SubsetOf(SHA, 2)
    with pytest.raises(ValueError, match="an archive or a folder"):
        source_from_json({"url": "x"})


def test_not_metadata_is_a_value_error():
    for doc in ({}, {**SYNTHETIC, "samples": None}, [1, 2], {k: v for k, v in SYNTHETIC.items() if k != "sha256"}):
        with pytest.raises(ValueError):
            SplitMeta.from_json(doc)


def test_checks_on_construction():
    with pytest.raises(ValueError, match="3 class counts for 2 classes"):
        SplitDescription("x", "train", False, 2, class_counts=(1, 1, 1))
    with pytest.raises(ValueError, match="1 class names for 2 classes"):
        SplitDescription("x", "train", False, 2, class_names=("a",))
    about = SplitDescription("x", "train", False, 2, class_counts=(1, 1))
    with pytest.raises(ValueError, match="not both"):
        SplitMeta(about, SHA, 2, (1, 1, 1), sealed_counts=(1, 1))
