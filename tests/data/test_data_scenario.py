"""Scenarios name the dataset: source 'prepared', a path/URL (prepared on the fly), samples = first N."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench_engine.data import split_sha256
from orchestrator.data.sources import prepare_named
from orchestrator.errors import BadInput
from orchestrator.run.execute import prepare_dataset
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
FAKE_ENGINES = [REPO / "tests" / "fixtures" / "fake_engine", REPO / "tests" / "fixtures" / "fake_engine2"]
FAKE_SCENARIO = REPO / "tests" / "fixtures" / "fake_scenario.yaml"


def scenario(*sets: str):
    # warmup 2: with 20 (the scenario's) a 40-sample split leaves no step to measure, refused at load time
    return load_scenario("cifar_resnet50", sets=["workload.batch.size=8", "workload.warmup_steps=2", *sets])


def test_prepared_source_resolves_to_the_first_n_samples_of_the_prepared_split(cache, cifar_archive):
    doc = prepare_named("cifar10", str(cifar_archive.path), cifar_archive.sha256)
    full = Path(doc["splits"]["train"]["path"])
    split = prepare_dataset(scenario("workload.dataset.source=prepared", "workload.dataset.samples=40"))
    assert (split.name, split.split, split.samples, split.synthetic) == ("cifar10", "train", 40, False)
    assert split.path.parent == full.parent and split.path != full
    assert split.sha256 == split_sha256(split.path) != doc["splits"]["train"]["sha256"]
    np.testing.assert_array_equal(np.load(split.path / "images.npy"), np.load(full / "images.npy")[:40])
    np.testing.assert_array_equal(np.load(split.path / "labels.npy"), np.load(full / "labels.npy")[:40])
    meta = json.loads((split.path / "dataset.json").read_text())
    assert meta["subset_of"]["sha256"] == doc["splits"]["train"]["sha256"] and meta["subset_of"]["rule"] == "first N samples"
    assert sum(meta["class_counts"]) == 40
    again = prepare_dataset(scenario("workload.dataset.source=prepared", "workload.dataset.samples=40"))
    assert again == split  # cached


def test_prepared_source_whole_split_and_test_split(cache, cifar_archive):
    doc = prepare_named("cifar10", str(cifar_archive.path), cifar_archive.sha256)
    whole = prepare_dataset(scenario("workload.dataset.source=prepared", "workload.dataset.samples=100"))
    assert str(whole.path) == doc["splits"]["train"]["path"] and whole.sha256 == doc["splits"]["train"]["sha256"]
    test = prepare_dataset(scenario("workload.dataset.source=prepared", "workload.dataset.split=test", "workload.dataset.samples=20"))
    assert str(test.path) == doc["splits"]["test"]["path"]


def test_prepared_source_absent_tells_how_to_prepare(cache):
    with pytest.raises(BadInput, match=r"cifar10 is not prepared; run `bench data prepare cifar10`"):
        prepare_dataset(scenario("workload.dataset.source=prepared"))


def test_prepared_source_checks(cache, cifar_archive):
    prepare_named("cifar10", str(cifar_archive.path), cifar_archive.sha256)
    with pytest.raises(BadInput, match="exceeds the 100 samples"):
        prepare_dataset(scenario("workload.dataset.source=prepared", "workload.dataset.samples=101"))
    with pytest.raises(BadInput, match="cifar10 images are 32x32x3"):
        prepare_dataset(scenario("workload.dataset.source=prepared", "workload.input.height=224", "workload.input.width=224"))
    with pytest.raises(BadInput, match="num_classes: 5, but cifar10 has 10 classes"):
        prepare_dataset(scenario("workload.dataset.source=prepared", "workload.model.num_classes=5", "workload.dataset.samples=16"))
    with pytest.raises(BadInput, match="unknown dataset 'mnist'"):
        prepare_dataset(scenario("workload.dataset.source=prepared", "workload.dataset.name=mnist"))


def test_archive_path_source_is_prepared_on_the_fly(cache, cifar_archive):
    source = f"{cifar_archive.path}#sha256={cifar_archive.sha256}"
    split = prepare_dataset(scenario(f"workload.dataset.source={source}", "workload.dataset.samples=24"))
    assert split.samples == 24 and not split.synthetic
    listed = prepare_named("cifar10", str(cifar_archive.path), cifar_archive.sha256)
    assert listed["cached"] is True  # the scenario filled the same cache
    with pytest.raises(BadInput, match="checksum mismatch"):  # without the pin: the official checksum
        prepare_dataset(scenario(f"workload.dataset.source={cifar_archive.path}", "workload.dataset.samples=24"))


def test_synthetic_source_unchanged(cache):
    split = prepare_dataset(scenario("workload.dataset.samples=32"))
    assert split.synthetic and split.samples == 32 and split.sha256 == split_sha256(split.path)


@pytest.mark.skipif(not all(p.is_dir() for p in FAKE_ENGINES) or not FAKE_SCENARIO.is_file(), reason="fake engines not present")
def test_scenario_run_on_prepared_cifar10_passes_parity(cache, cifar_archive, bench, monkeypatch, tmp_path):
    import os

    from orchestrator.engines.registry import discover

    monkeypatch.setenv("BENCH_ENGINE_PATH", os.pathsep.join(map(str, FAKE_ENGINES)))
    discover.cache_clear()
    try:
        assert bench("data", "prepare", "cifar10", "--source", str(cifar_archive.path), "--sha256", cifar_archive.sha256).code == 0
        result = bench("scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(tmp_path / "results"), "--json",
                       "--engines", "fake", "--precisions", "fp32",
                       "--set", "workload.dataset.name=cifar10", "--set", "workload.dataset.source=prepared",
                       "--set", "workload.dataset.samples=64", "--set", "workload.input.height=32", "--set", "workload.input.width=32")
        assert result.code == 0, result.stderr
        artifact = Path(json.loads(result.stdout)["artifact"])
        spec = json.loads(next(artifact.glob("runs/*/spec.json")).read_text())
        engine_result = json.loads(next(artifact.glob("runs/*/result.json")).read_text())
        dataset = spec["parity"]["dataset"]
        assert dataset["name"] == "cifar10" and dataset["samples"] == 64 and dataset["synthetic"] is False
        assert engine_result["work"]["dataset_sha256"] == dataset["sha256"] == split_sha256(Path(dataset["path"]))
        run = json.loads(next(artifact.glob("runs/*/run.json")).read_text())
        assert run["status"] == "ok" and run["parity"]["ok"]
    finally:
        monkeypatch.delenv("BENCH_ENGINE_PATH")
        discover.cache_clear()


def test_scenario_time_dataset_checks():
    from orchestrator.data.sources import check_workload_dataset

    workload = scenario("workload.dataset.source=prepared").workload.to_json()
    check_workload_dataset(workload)
    check_workload_dataset({**workload, "dataset": {**workload["dataset"], "name": "anything", "source": "synthetic"}})
    for change, message in (({"name": "mnist"}, "unknown dataset 'mnist'"), ({"source": "/x.tar.gz#md5=1"}, "#sha256=HEX")):
        with pytest.raises(BadInput, match=message):
            check_workload_dataset({**workload, "dataset": {**workload["dataset"], **change}})
    with pytest.raises(BadInput, match="cifar10 images are 32x32x3"):
        check_workload_dataset({**workload, "input": {"height": 224, "width": 224, "channels": 3}})
    with pytest.raises(BadInput, match="num_classes: 5"):
        check_workload_dataset({**workload, "model": {**workload["model"], "num_classes": 5}})
