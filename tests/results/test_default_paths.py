"""Reports and archives land beside the scenario folders by default, never among the artifacts."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.artifacts.archive import default_archive_path
from orchestrator.artifacts.layout import results_root
from orchestrator.reports import default_report_dir
from tests.results.helpers import run_cli

ID = "20260101T000000Z-abc123"


def test_the_results_root_of_each_place(tmp_path: Path) -> None:
    artifact = tmp_path / "results" / "demo" / ID
    artifact.mkdir(parents=True)
    archived = tmp_path / "results" / "archives" / "demo" / f"{ID}.tar.gz"
    beside = tmp_path / "results" / "demo" / f"{ID}.tar.gz"  # where archives used to go
    loose = tmp_path / "downloads" / "a.tar.gz"
    for archive in (archived, beside, loose):
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(b"")
    elsewhere = tmp_path / "copies" / ID  # e.g. a published copy
    elsewhere.mkdir(parents=True)
    assert results_root(artifact, "demo") == tmp_path / "results"
    assert results_root(archived, "demo") == tmp_path / "results"
    assert results_root(beside, "demo") == tmp_path / "results"
    assert results_root(loose, "demo") == tmp_path / "downloads"
    assert results_root(elsewhere, "demo") == tmp_path / "copies"
    assert default_report_dir(artifact, "demo", ID) == tmp_path / "results" / "reports" / "demo" / f"{ID}-report"
    assert default_report_dir(archived, "demo", ID) == tmp_path / "results" / "reports" / "demo" / f"{ID}-report"
    assert default_report_dir(loose, "demo", ID) == tmp_path / "downloads" / "reports" / "demo" / f"{ID}-report"
    assert default_archive_path(artifact, "demo") == archived
    assert default_archive_path(elsewhere, "demo") == tmp_path / "copies" / "archives" / "demo" / f"{ID}.tar.gz"


def test_default_report_and_archive_leave_the_scenario_folder_to_artifacts(make_artifact: Callable[..., Path],
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture) -> None:
    artifact = make_artifact({("pytorch", "bf16"): [100.0]}, artifact_id=ID)
    scenario_folder, results = artifact.parent, artifact.parents[1]
    code, out, err = run_cli(["results", "archive", artifact, "--json"], monkeypatch, capsys)
    assert code == 0, err
    archive = Path(json.loads(out)["archive"])
    assert archive == results / "archives" / "synthetic" / f"{ID}.tar.gz"
    code, out, err = run_cli(["results", "report", artifact, "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert Path(json.loads(out)["out"]) == results / "reports" / "synthetic" / f"{ID}-report"
    code, out, err = run_cli(["results", "report", archive, "--json", "--html"], monkeypatch, capsys)  # the archive's report: the same place
    assert code == 0, err
    assert Path(json.loads(out)["out"]) == results / "reports" / "synthetic" / f"{ID}-report"
    assert [p.name for p in scenario_folder.iterdir()] == [ID]
    # what a campaign script takes for the newest artifact (benchmarks/opennn_seed.sh: ls -1d DIR/*/ | sort | tail -n 1)
    newest = subprocess.run(f"ls -1d '{scenario_folder}'/*/ | sort | tail -n 1", shell=True, capture_output=True, text=True, check=True)
    assert newest.stdout.strip().rstrip("/") == str(artifact)
