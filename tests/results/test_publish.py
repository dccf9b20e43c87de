"""``bench results publish``: a copy without bench's shared weights that still validates; omission cannot hide other files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.artifacts import seal
from orchestrator.artifacts.layout import Artifact
from orchestrator.artifacts.manifest import write_manifest
from orchestrator.artifacts.validate import validate_artifact
from tests.results.helpers import run_cli

RUNS = {("pytorch", "bf16"): [100.0, 101.0]}


@pytest.fixture()
def with_weights(make_artifact: Callable[..., Path]) -> Path:
    """An artifact holding a shared-weights file and its hard link in each run folder, as bench writes them,
    and one earlier attempt of a run (moved aside by ``bench scenario resume``) with its own link."""
    root = make_artifact(RUNS)
    weights = root / "init" / "resnet50_v1.5-c10-ch3-seed0.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(os.urandom(4096))
    for run in (root / "runs").iterdir():
        os.link(weights, run / "init.safetensors")
    attempt = root / "attempts" / next((root / "runs").iterdir()).name / "1"
    attempt.mkdir(parents=True)
    os.link(weights, attempt / "init.safetensors")
    (attempt / "engine.log").write_text("crash\n")
    manifest = json.loads((root / "manifest.json").read_text())
    seal.start(root, trust_current=True)  # files added by hand, after the manifest sealed the artifact: adopt them
    write_manifest(Artifact(root, manifest["scenario"], manifest["artifact_id"]), complete=True)
    assert validate_artifact(root) == []
    return root


def test_the_copy_leaves_the_weights_out_and_validates(with_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(["results", "publish", with_weights, "--out", tmp_path / "pub", "--json"], monkeypatch, capsys)
    assert code == 0, err
    copy = Path(json.loads(out)["copy"])
    assert copy.name == with_weights.name and not list(copy.rglob("*.safetensors"))
    assert len(list(with_weights.rglob("*.safetensors"))) == 4  # init/, two runs, one earlier attempt
    assert (copy / "attempts").is_dir() and list((copy / "attempts").rglob("engine.log"))
    manifest = json.loads((copy / "manifest.json").read_text())
    assert sorted(item["path"] for item in manifest["omitted"]) == sorted(
        p.relative_to(with_weights).as_posix() for p in with_weights.rglob("*.safetensors"))
    assert validate_artifact(copy) == []
    code, out, _ = run_cli(["results", "validate", copy], monkeypatch, capsys)
    assert code == 0 and "valid" in out
    code, _, err = run_cli(["results", "publish", with_weights, "--out", tmp_path / "pub"], monkeypatch, capsys)
    assert code == 2 and "exists" in err


def test_omission_cannot_hide_a_result(with_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture) -> None:
    run_cli(["results", "publish", with_weights, "--out", tmp_path / "pub"], monkeypatch, capsys)
    copy = tmp_path / "pub" / with_weights.name
    manifest = json.loads((copy / "manifest.json").read_text())
    result = next(item for item in manifest["files"] if item["path"].endswith("run.json"))
    manifest["files"].remove(result)
    manifest["omitted"].append(result)  # a forger drops a run record and calls it omitted
    (copy / result["path"]).unlink()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    problems = validate_artifact(copy)
    assert [p.path for p in problems] == [result["path"]] and "only bench's shared initial weights" in problems[0].problem
    code, _, err = run_cli(["results", "validate", copy], monkeypatch, capsys)
    assert code != 0 and "only bench's shared initial weights" in err


def test_an_omitted_file_that_is_present_is_refused(with_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    run_cli(["results", "publish", with_weights, "--out", tmp_path / "pub"], monkeypatch, capsys)
    copy = tmp_path / "pub" / with_weights.name
    (copy / "init").mkdir()
    (copy / "init" / "resnet50_v1.5-c10-ch3-seed0.safetensors").write_bytes(b"forged weights")
    assert any("yet present" in p.problem for p in validate_artifact(copy))


def test_an_invalid_artifact_is_not_published(with_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    (with_weights / "summary.json").write_text("{}")
    code, _, err = run_cli(["results", "publish", with_weights, "--out", tmp_path / "pub"], monkeypatch, capsys)
    assert code == 2 and "invalid artifact" in err and not (tmp_path / "pub").exists()


def test_an_archive_is_published_like_its_folder(with_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(["results", "archive", with_weights, "--json"], monkeypatch, capsys)
    assert code == 0, err
    archive = json.loads(out)["archive"]
    code, out, err = run_cli(["results", "publish", archive, "--out", tmp_path / "pub", "--json"], monkeypatch, capsys)
    assert code == 0, err
    copy = Path(json.loads(out)["copy"])
    assert copy.name == with_weights.name and validate_artifact(copy) == [] and not list(copy.rglob("*.safetensors"))
    code, _, err = run_cli(["results", "publish", tmp_path / "missing.tar.gz", "--out", tmp_path / "pub2"], monkeypatch, capsys)
    assert code == 2 and "no such artifact" in err
