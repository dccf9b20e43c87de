"""An artifact copied while bench was writing it: its summary counts the newer runs as not started, and
``bench results show`` says so (a run in flight; runs written after the summary) instead of reading as the whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.artifacts import Artifact, write_manifest
from orchestrator.jsonio import read_json, write_json
from tests.results.helpers import run_cli
from tests.typed_docs import summarize_docs

NOT_STARTED = "not started: the scenario was interrupted"


def _skipped(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "status": "skipped", "reason": NOT_STARTED, "exit_code": None, "throughput": None,
            "parity": {"checked": False, "ok": False, "mismatches": []}}


def _summary_from_before(folder: Path, skipped: set[str]) -> None:
    """Rewrite the summary as bench wrote it before the runs ``skipped`` ran (they counted as not started)."""
    runs = []
    for run_dir in sorted((folder / "runs").iterdir()):
        record = read_json(run_dir / "run.json", "run-record")
        result = read_json(run_dir / "result.json", "engine-result") if (run_dir / "result.json").exists() else None
        runs.append((_skipped(record), None) if record["run_id"] in skipped else (record, result))
    old = read_json(folder / "summary.json", "summary")
    write_json(folder / "summary.json", summarize_docs(old["scenario"], old["artifact_id"], False, runs, old["host"]), "summary")


def _warnings(folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> list[str]:
    code, text, err = run_cli(["results", "show", folder, "--json"], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(text)["warnings"]


def test_a_copy_taken_mid_run_says_what_its_summary_leaves_out(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture) -> None:
    folder = make_artifact({("pytorch", "bf16"): [100.0, 101.0, 102.0]})
    r2, r3 = "pytorch-bf16-optimized-b32-d1-r2", "pytorch-bf16-optimized-b32-d1-r3"
    _summary_from_before(folder, {r2, r3})  # the summary of the end of r1; r2 ran since; r3 is being written
    (folder / "runs" / r3 / "run.json").unlink()
    (folder / "runs" / r3 / "result.json").unlink()
    write_manifest(Artifact(folder, folder.parent.name, folder.name), complete=False, in_flight_folders=[f"runs/{r3}"])
    code, _, err = run_cli(["results", "validate", folder], monkeypatch, capsys)
    assert code == 0, err  # a copy taken mid-run is a valid artifact: it is only not finished
    assert _warnings(folder, monkeypatch, capsys) == [
        f"this artifact was copied, or its bench stopped, while runs/{r3} was being written; "
        f"`bench scenario resume {folder}` finishes it",
        f"1 run(s) written after this summary are counted as not started in it ({r2}); `bench scenario resume` counts them"]
    code, _, err = run_cli(["results", "show", folder], monkeypatch, capsys)
    assert code == 0 and err.count("written after this summary") == 1 and "was being written" in err


def test_a_sealed_artifact_with_runs_not_started_says_nothing_of_it(make_artifact: Callable[..., Path],
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture) -> None:
    """Interrupted and sealed: its not-started runs have records that say skipped, as the summary does."""
    folder = make_artifact({("pytorch", "bf16"): [100.0, 101.0]})
    r2 = folder / "runs" / "pytorch-bf16-optimized-b32-d1-r2"
    write_json(r2 / "run.json", _skipped(read_json(r2 / "run.json", "run-record")), "run-record")
    (r2 / "result.json").unlink()
    _summary_from_before(folder, {r2.name})
    write_manifest(Artifact(folder, folder.parent.name, folder.name), complete=False)
    assert _warnings(folder, monkeypatch, capsys) == []


def test_more_than_three_late_runs_are_counted_not_listed(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    folder = make_artifact({("pytorch", "bf16"): [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]})
    late = {f"pytorch-bf16-optimized-b32-d1-r{i}" for i in range(2, 7)}
    _summary_from_before(folder, late)
    write_manifest(Artifact(folder, folder.parent.name, folder.name), complete=False)
    (warning,) = _warnings(folder, monkeypatch, capsys)
    assert warning.startswith("5 run(s) written after this summary") and "+2 more)" in warning
