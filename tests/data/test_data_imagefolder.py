"""ImageNet-style folders: class subfolders decoded once (Pillow), resized and center-cropped, cached."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from orchestrator.data.imagefolder import decode
from orchestrator.data.sources import prepare_named
from orchestrator.errors import BadInput
from orchestrator.run.execute import prepare_dataset
from orchestrator.scenario import load_scenario

Image = pytest.importorskip("PIL.Image", reason="Pillow is optional; the folder reader needs it")

COLORS = {"ant": (255, 0, 0), "cat": (0, 255, 0), "dog": (0, 0, 255)}  # sorted: ant=0, cat=1, dog=2


def solid(path: Path, color: tuple[int, int, int], size: tuple[int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "imagenet"
    sizes = [(40, 30), (30, 50), (64, 64), (17, 23)]
    for name, color in COLORS.items():
        for i, size in enumerate(sizes):
            solid(root / "train" / name / f"{i}.png", color, size)
        solid(root / "val" / name / "v0.png", color, (50, 40))
    solid(root / "train" / "dog" / "deeper" / "x.jpg", COLORS["dog"], (80, 60))  # any depth, JPEG too
    (root / "train" / "cat" / "notes.txt").write_text("not an image")
    (root / "train" / ".hidden").mkdir()
    return root


def labels_match_colours(images: np.ndarray, labels: np.ndarray) -> None:
    colours = np.array(list(COLORS.values()))
    centre = images[:, images.shape[1] // 2, images.shape[2] // 2, :].astype(int)
    nearest = np.abs(centre[:, None, :] - colours[None]).sum(-1).argmin(1)
    np.testing.assert_array_equal(nearest, labels)


def test_prepare_folder(bench, cache, folder):
    result = bench("data", "prepare", "imagenet", "--source", str(folder), "--size", "32", "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["synthetic"] is False and doc["geometry"] == [32, 32, 3] and doc["num_classes"] == 3
    assert doc["samples"] == {"train": 13, "test": 3}
    assert doc["class_counts"]["train"] == {"ant": 4, "cat": 4, "dog": 5}
    assert doc["class_counts"]["test"] == {"ant": 1, "cat": 1, "dog": 1}
    train = Path(doc["splits"]["train"]["path"])
    images, labels = np.load(train / "images.npy"), np.load(train / "labels.npy")
    assert images.shape == (13, 32, 32, 3) and images.dtype == np.uint8 and labels.dtype == np.int32
    labels_match_colours(images, labels)
    assert list(labels) != sorted(labels), "the canonical order is a seeded permutation, not class by class"
    meta = json.loads((train / "dataset.json").read_text())
    assert meta["class_names"] == ["ant", "cat", "dog"]
    assert bench("data", "prepare", "imagenet", "--source", str(folder), "--size", "32", "--json").json()["cached"] is True
    solid(folder / "train" / "ant" / "new.png", COLORS["ant"], (33, 33))
    changed = bench("data", "prepare", "imagenet", "--source", str(folder), "--size", "32", "--json").json()
    assert changed["cached"] is False and changed["samples"]["train"] == 14


def test_flat_folder_samples_limit_and_order_is_stable(cache, folder):
    flat = folder / "train"
    doc = prepare_named("imagenet", str(flat), geometry=(16, 16, 3), samples=5)
    assert doc["samples"] == {"train": 5}
    full = prepare_named("imagenet", str(flat), geometry=(16, 16, 3))
    first = np.load(Path(doc["splits"]["train"]["path"]) / "labels.npy")
    np.testing.assert_array_equal(first, np.load(Path(full["splits"]["train"]["path"]) / "labels.npy")[:5])


def test_center_crop_of_a_wide_image(tmp_path):
    image = Image.new("RGB", (300, 100), (255, 0, 0))
    image.paste((0, 255, 0), (100, 0, 200, 100))
    image.paste((0, 0, 255), (200, 0, 300, 100))
    image.save(tmp_path / "wide.png")
    out = decode(tmp_path / "wide.png", (32, 32, 3))
    assert out.shape == (32, 32, 3)
    middle = out[:, 2:30].astype(int)
    assert (middle[..., 1] > 200).all() and (middle[..., 0] < 60).all() and (middle[..., 2] < 60).all()
    grey = decode(tmp_path / "wide.png", (8, 12, 1))
    assert grey.shape == (8, 12, 1)


def test_folder_errors(cache, folder, tmp_path):
    bad = folder / "train" / "cat" / "broken.png"
    bad.write_bytes(b"\x89PNG not really")
    with pytest.raises(BadInput, match=r"cannot decode image .*broken\.png"):
        prepare_named("imagenet", str(folder), geometry=(16, 16, 3))
    bad.unlink()
    solid(folder / "val" / "zebra" / "z.png", (1, 2, 3), (10, 10))
    with pytest.raises(BadInput, match="'zebra' is not a class of the train split"):
        prepare_named("imagenet", str(folder), geometry=(16, 16, 3))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match="no class subfolders"):
        prepare_named("imagenet", str(empty))
    with pytest.raises(BadInput, match="not a folder"):
        prepare_named("imagenet", str(tmp_path / "absent"))
    with pytest.raises(BadInput, match="--source FOLDER is required"):
        prepare_named("imagenet")
    with pytest.raises(BadInput, match="--sha256"):
        prepare_named("imagenet", str(folder), "a" * 64)
    assert not list(cache.glob("imagenet/prepared-*.json"))


def test_missing_pillow_is_bad_input(bench, cache, folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` now raises ImportError
    result = bench("data", "prepare", "imagenet", "--source", str(folder), "--size", "16")
    assert result.code == 2 and "needs Pillow" in result.stderr and "pip install pillow" in result.stderr


def test_scenario_with_folder_source_and_prepared_geometry(cache, folder):
    base = ["workload.batch.size=4", "workload.warmup_steps=1", "workload.dataset.name=imagenet", "workload.model.num_classes=3",
            "workload.input.height=24", "workload.input.width=24"]
    split = prepare_dataset(load_scenario("cifar_resnet50", sets=[*base, f"workload.dataset.source={folder}", "workload.dataset.samples=8"]))
    assert split.samples == 8 and np.load(split.path / "images.npy").shape == (8, 24, 24, 3)
    whole = prepare_named("imagenet", str(folder), geometry=(24, 24, 3))  # decodes all 13; its first 8 are the same
    assert whole["cached"] is False and whole["samples"]["train"] == 13
    assert prepare_dataset(load_scenario("cifar_resnet50", sets=[*base, "workload.dataset.source=prepared",
                                                                  "workload.dataset.samples=8"])).sha256 == split.sha256
    prepare_named("imagenet", str(folder), geometry=(24, 24, 3), samples=8)
    prepared = prepare_dataset(load_scenario("cifar_resnet50", sets=[*base, "workload.dataset.source=prepared", "workload.dataset.samples=8"]))
    assert prepared == split
    with pytest.raises(BadInput, match=r"imagenet is prepared at 24x24x3.*--source FOLDER --size 32x32"):
        prepare_dataset(load_scenario("cifar_resnet50", sets=[*base[:3], "workload.dataset.source=prepared", "workload.dataset.samples=8"]))
    with pytest.raises(BadInput, match="num_classes: 2, but imagenet has 3 classes"):
        prepare_dataset(load_scenario("cifar_resnet50", sets=[*base, "workload.model.num_classes=2", "workload.dataset.source=prepared",
                                                                "workload.dataset.samples=8"]))


def test_links_inside_the_folder_are_followed(cache, folder, tmp_path):
    """The control: a link to an image or a folder inside the dataset folder is read like a file or folder."""
    (folder / "train" / "ant" / "linked.png").symlink_to(folder / "train" / "ant" / "0.png")
    (folder / "shared").mkdir()
    solid(folder / "shared" / "s.png", COLORS["cat"], (20, 20))
    (folder / "train" / "cat" / "shared").symlink_to(folder / "shared")
    doc = prepare_named("imagenet", str(folder), None, (16, 16, 3), None)
    assert doc["class_counts"]["train"] == {"ant": 5, "cat": 5, "dog": 5}


@pytest.mark.parametrize("case", ["file-out", "folder-out", "class-out", "loop", "twice"])
def test_links_out_of_the_folder_or_in_a_loop_are_refused(case, cache, folder, tmp_path):
    outside = tmp_path / "outside"
    solid(outside / "secret.png", (1, 2, 3), (20, 20))
    cls = folder / "train" / "ant"
    if case == "file-out":
        (cls / "x.png").symlink_to(outside / "secret.png")
    elif case == "folder-out":
        (cls / "sub").symlink_to(outside)
    elif case == "class-out":
        (folder / "train" / "eel").symlink_to(outside)
        (folder / "val" / "eel").mkdir()
    elif case == "loop":
        (cls / "again").symlink_to(cls)
    else:
        (cls / "dogs").symlink_to(folder / "train" / "dog")
    needle = "leads back to a folder already read" if case in ("loop", "twice") else "outside the folder"
    with pytest.raises(BadInput, match=needle):
        prepare_named("imagenet", str(folder), None, (16, 16, 3), None)
