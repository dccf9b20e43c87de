"""The strong-scaling table on synthetic artifacts: summary.json ``scaling``, ``bench results show``, the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.judge import summary as judge_summary
from orchestrator.judge.summary_model import GroupRow
from orchestrator.schemas import validate
from tests.results.helpers import _result, run_cli
from tests.typed_docs import summarize_docs as summarize

BATCH = 32


def _record(run_id: str, engine: str, precision: str, devices: int, repeat: int, value: float | None) -> dict[str, Any]:
    ok = value is not None
    return {"schema_version": 1, "run_id": run_id, "engine": engine, "precision": precision, "path": "optimized",
            "batch_per_device": BATCH, "devices": devices, "repeat": repeat, "status": "ok" if ok else "failed",
            "reason": None if ok else "crash: rank 1 of 2 exited with code 3", "exit_code": 0 if ok else 1,
            "runtime": {"name": "local", "interpreter": "/usr/bin/python3"}, "started_at": "2026-01-01T00:00:00.000Z",
            "finished_at": "2026-01-01T00:00:10.000Z", "wall_s": 10.0,
            "parity": {"checked": ok, "ok": ok, "mismatches": []}, "throughput": value}


def build_scaling_artifact(root: Path, throughputs: dict[tuple[str, str, int], list[float | None]]) -> Path:
    """An artifact with one run per value of every (engine, precision, devices); None is a failed run."""
    from orchestrator.artifacts import Artifact, write_manifest
    from orchestrator.jsonio import write_json

    folder = root / "scaling" / "20260101T000000Z-5ca1e0"
    artifact = Artifact(folder, "scaling", "20260101T000000Z-5ca1e0")
    runs = []
    for (engine, precision, devices), values in throughputs.items():
        for repeat, value in enumerate(values, 1):
            run_id = f"{engine}-{precision}-optimized-b{BATCH}-d{devices}-r{repeat}"
            run_dir = artifact.run_dir(run_id)
            run_dir.mkdir(parents=True)
            record = _record(run_id, engine, precision, devices, repeat, value)
            result = None
            if value is not None:
                result = _result(run_id, engine, precision, value)
                result["work"].update(world_size=devices, batch_per_device=BATCH, batch_global=BATCH * devices)
                write_json(run_dir / "result.json", result, "engine-result")
            (run_dir / "engine.log").write_text(f"{run_id}\n")
            write_json(run_dir / "run.json", record, "run-record")
            runs.append((record, result))
    write_json(folder / "summary.json", summarize("scaling", artifact.artifact_id, False, runs, {"hostname": "synthetic"}), "summary")
    write_manifest(artifact, complete=True)
    return folder


THROUGHPUTS: dict[tuple[str, str, int], list[float | None]] = {
    ("pytorch", "bf16", 1): [1000.0, 1020.0, 980.0],
    ("pytorch", "bf16", 2): [1900.0, 1950.0, 1850.0],
    ("pytorch", "bf16", 8): [7720.0, 7800.0, 7650.0],
    ("pytorch", "fp32", 1): [400.0],  # single-device only: no scaling row
    ("jax", "bf16", 2): [2100.0],  # no 1-device run of jax bf16
    ("tensorflow", "bf16", 1): [800.0],
    ("tensorflow", "bf16", 2): [None],  # the 2-device run failed
}


@pytest.fixture()
def artifact(tmp_path: Path) -> Path:
    return build_scaling_artifact(tmp_path / "results", THROUGHPUTS)


def _rows(summary: dict[str, Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(r["engine"], r["precision"], r["devices"]): r for r in summary["scaling"]}


def test_summary_scaling_rows(artifact: Path) -> None:
    summary = json.loads((artifact / "summary.json").read_text())
    validate(summary, "summary")
    rows = _rows(summary)
    assert sorted(rows) == [("jax", "bf16", 2), ("pytorch", "bf16", 1), ("pytorch", "bf16", 2), ("pytorch", "bf16", 8),
                            ("tensorflow", "bf16", 1), ("tensorflow", "bf16", 2)]
    one, two, eight = rows[("pytorch", "bf16", 1)], rows[("pytorch", "bf16", 2)], rows[("pytorch", "bf16", 8)]
    assert one["speedup"] == pytest.approx(1.0) and one["efficiency"] == pytest.approx(1.0)
    assert two["throughput"] == 1900.0 and two["baseline_throughput"] == 1000.0 and two["batch_global"] == 2 * BATCH
    assert two["speedup"] == pytest.approx(1.9) and two["efficiency"] == pytest.approx(0.95)
    assert eight["speedup"] == pytest.approx(7.72) and eight["efficiency"] == pytest.approx(7.72 / 8)
    low, high = eight["speedup_range"]  # 3 repeats a side: the range of the ratio, no bootstrap "95% CI"
    assert eight["speedup_ci95"] is None and low <= 7.72 <= high and eight["n"] == 3
    jax = rows[("jax", "bf16", 2)]
    assert jax["speedup"] is None and jax["efficiency"] is None and "no valid 1-device run" in jax["note"]
    failed = rows[("tensorflow", "bf16", 2)]
    assert failed["throughput"] is None and failed["speedup"] is None and failed["n"] == 0
    assert failed["note"] == "no valid run on this device count"


def scaling(groups: list[dict[str, Any]], values: dict[tuple[Any, ...], list[float]]) -> list[dict[str, Any]]:
    """The scaling rows, as summary.json holds them, of groups given as documents (each with a valid run)."""
    rows = [GroupRow.from_json({**g, "n": 0, "throughput": None}) for g in groups]
    return [row.to_json() for row in judge_summary.scaling(rows, values)]


def test_no_scaling_without_a_multi_device_run() -> None:
    groups = [{"engine": "pytorch", "precision": "fp32", "path": "optimized", "batch_per_device": 32, "devices": 1}]
    assert scaling(groups, {("pytorch", "fp32", "optimized", 32, 1): [10.0, 11.0]}) == []


def test_scaling_ignores_other_batches_and_paths() -> None:
    groups = [{"engine": "e", "precision": "fp32", "path": p, "batch_per_device": b, "devices": d}
              for p in ("optimized", "baseline") for b in (32, 64) for d in (1, 4)]
    values = {(g["engine"], g["precision"], g["path"], g["batch_per_device"], g["devices"]):
              [float(g["batch_per_device"] * g["devices"] * (2 if g["path"] == "optimized" else 1))] for g in groups}
    rows = scaling(groups, values)
    assert len(rows) == 8 and all(r["speedup"] == pytest.approx(r["devices"]) for r in rows)
    assert [(r["path"], r["batch_per_device"], r["devices"]) for r in rows][:2] == [("baseline", 32, 1), ("baseline", 32, 4)]
    assert np.allclose([r["efficiency"] for r in rows], 1.0)


def test_results_show_prints_the_scaling_table(artifact: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    code, out, err = run_cli(["results", "show", str(artifact)], monkeypatch, capsys)
    assert code == 0, err
    assert "strong scaling" in out
    line = next(row for row in out.splitlines() if "pytorch" in row and "7.72x" in row)
    assert "96.5%" in line and "256" in line  # efficiency and global batch 8 x 32
    assert "no valid 1-device run" in out


def test_report_has_the_scaling_table(artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture) -> None:
    out_dir = tmp_path / "report"
    code, _, err = run_cli(["results", "report", str(artifact), "--html", "--out", str(out_dir)], monkeypatch, capsys)
    assert code == 0, err
    markdown = (out_dir / "report.md").read_text()
    section = markdown.split("## Strong scaling", 1)[1].split("\n## ", 1)[0]
    assert "| pytorch | bf16 | optimized | 32 | 8 | 256 | 3 | 7,720.0 | 7.72x |" in section
    assert "| 96.5% |" in section and "efficiency = speedup / N" in section
    html = (out_dir / "report.html").read_text()
    assert 'data-table="scaling"' in html and "7.72x" in html
    from orchestrator.reports.plots import matplotlib_available

    if matplotlib_available()[0]:
        assert (out_dir / "plot-scaling.png").is_file() and 'data-plot="scaling"' in html
