"""The executor end to end with the numpy fake engines: every outcome leaves a valid record."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.artifacts import validate_artifact
from tests.core.cli_helpers import FAKE_SCENARIO, FIXTURES, run_cli

pytestmark = pytest.mark.usefixtures("fake_engines")


def run_fake(capsys, monkeypatch, tmp_path, *extra):
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local",
                             "--out", str(tmp_path), "--json", *extra)
    document = json.loads(out) if out.strip().startswith("{") else None
    return code, document, err


def records(artifact: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(artifact.glob("runs/*/run.json"))}


def test_ok_runs_make_a_valid_artifact(capsys, monkeypatch, tmp_path):
    code, summary, _ = run_fake(capsys, monkeypatch, tmp_path)
    assert code == 0, summary
    artifact = Path(summary["artifact"])
    assert validate_artifact(artifact) == []
    runs = records(artifact)
    assert len(runs) == 4 and {r["status"] for r in runs.values()} == {"ok"}
    assert all(r["parity"]["checked"] and r["parity"]["ok"] for r in runs.values())
    result = json.loads(next(artifact.glob("runs/fake-fp32-*/result.json")).read_text())
    # 64 samples, batch 16, 2 epochs, 1 warmup step: 8 steps in all, 7 measured
    assert result["work"]["steps"] == 8 and result["work"]["samples"] == 128
    assert result["measurements"]["steady"]["steps"] == 7 and result["measurements"]["warmup_steps"] == 1
    # one ratio per pair, against the reference engine (the first of matrix.engines)
    assert {(r["engine"], r["baseline_engine"]) for r in summary["ratios"]} == {("fake2", "fake")}
    assert summary["reference_engine"] == "fake" and all(r["interval"] == "range" for r in summary["ratios"])
    assert summary["counts"] == {"ok": 4}


def test_results_show_and_validate_cli(capsys, monkeypatch, tmp_path):
    _, summary, _ = run_fake(capsys, monkeypatch, tmp_path, "--engines", "fake", "--precisions", "fp32")
    artifact = summary["artifact"]
    code, out, _ = run_cli(capsys, monkeypatch, "results", "show", artifact)
    assert code == 0 and re.search(r"^fake\s+fp32\s+1\s+ok\s", out, re.M)  # compact: the run id as engine, precision, repeat
    code, out, _ = run_cli(capsys, monkeypatch, "results", "show", artifact, "--wide")
    assert code == 0 and "fake-fp32-optimized-b16-d1-r1" in out
    code, out, _ = run_cli(capsys, monkeypatch, "results", "validate", artifact)
    assert code == 0 and "valid" in out


def test_tampered_or_missing_files_fail_validation(capsys, monkeypatch, tmp_path):
    _, summary, _ = run_fake(capsys, monkeypatch, tmp_path, "--engines", "fake", "--precisions", "fp32")
    artifact = Path(summary["artifact"])
    result = next(artifact.glob("runs/*/result.json"))
    result.write_text(result.read_text().replace('"ok"', '"failed"', 1))
    (artifact / "extra.txt").write_text("sneaked in")
    log = next(artifact.glob("runs/*/engine.log"))
    log.unlink()
    problems: dict[str, str] = {}
    for p in validate_artifact(artifact):
        problems[Path(p.path).name] = problems.get(Path(p.path).name, "") + p.problem + "; "
    assert "modified" in problems["result.json"]
    assert "not listed" in problems["extra.txt"] and "outside the artifact's layout" in problems["extra.txt"]
    assert "missing" in problems["engine.log"]
    code, _, err = run_cli(capsys, monkeypatch, "results", "validate", str(artifact))
    assert code == 1 and "modified" in err


@pytest.mark.parametrize(
    ("behaviour", "status", "reason"),
    [
        ("crash", "failed", "wrote no result file"),
        ("no_result", "failed", "wrote no result file"),
        ("bad_result", "invalid", "does not match its schema"),
        ("wrong_params", "invalid", "trainable_parameters expected 23528522 got 23528523"),
        ("oom", "failed", "oom: RuntimeError: CUDA out of memory"),
    ],
)
def test_engine_faults_are_recorded(capsys, monkeypatch, tmp_path, behaviour, status, reason):
    code, summary, _ = run_fake(capsys, monkeypatch, tmp_path, "--engines", "fake", "--precisions", "fp32",
                                "--set", f"engines.fake.options.behaviour={behaviour}")
    assert code == 1
    artifact = Path(summary["artifact"])
    (record,) = records(artifact).values()
    assert record["status"] == status and reason in record["reason"]
    assert validate_artifact(artifact) == []


def test_timeout_stops_the_engine_and_keeps_earlier_runs(capsys, monkeypatch, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(FAKE_SCENARIO.read_text().replace("timeout_s: 60", "timeout_s: 3")
                        + "engines:\n  fake2: {options: {behaviour: hang}}\n")
    code, out, _ = run_cli(capsys, monkeypatch, "scenario", "run", str(scenario), "--runtime", "local", "--out",
                           str(tmp_path / "r"), "--precisions", "fp32", "--json")
    summary = json.loads(out)
    assert code == 1
    runs = records(Path(summary["artifact"]))
    assert runs["fake-fp32-optimized-b16-d1-r1"]["status"] == "ok"
    assert runs["fake2-fp32-optimized-b16-d1-r1"]["status"] == "timeout"
    assert validate_artifact(Path(summary["artifact"])) == []


def test_ctrl_c_records_the_interrupt_and_skips_the_rest(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(FAKE_SCENARIO.read_text() + "engines:\n  fake2: {options: {behaviour: hang}}\n")
    env = {**os.environ, "BENCH_ENGINE_PATH": os.pathsep.join([str(FIXTURES / "fake_engine"), str(FIXTURES / "fake_engine2")])}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "scenario", "run", str(scenario), "--runtime", "local",
                             "--out", str(tmp_path / "r"), "--verbose"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = ""
    deadline = time.monotonic() + 120
    while "hanging" not in output and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output += line
    assert "hanging" in output, output
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output + rest
    (artifact,) = (tmp_path / "r" / "fake_tiny").iterdir()
    runs = records(artifact)
    statuses = {k: v["status"] for k, v in runs.items()}
    assert statuses["fake-fp32-optimized-b16-d1-r1"] == "ok"
    assert statuses["fake2-fp32-optimized-b16-d1-r1"] == "interrupted"
    assert statuses["fake-bf16-optimized-b16-d1-r1"] == "ok"
    assert statuses["fake2-bf16-optimized-b16-d1-r1"] == "skipped"
    assert validate_artifact(artifact) == []
    assert json.loads((artifact / "manifest.json").read_text())["complete"] is False


def test_dry_run_writes_nothing(capsys, monkeypatch, tmp_path):
    code, out, _ = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--dry-run", "--wide", "--out", str(tmp_path / "r"))
    assert code == 0 and "fake2-bf16-optimized-b16-d1-r1" in out
    assert not (tmp_path / "r").exists()


def test_an_invalid_run_keeps_its_apparent_throughput_but_never_a_ranked_one(capsys, monkeypatch, tmp_path):
    code, summary, _ = run_fake(capsys, monkeypatch, tmp_path, "--engines", "fake", "--precisions", "fp32",
                                "--set", "engines.fake.options.behaviour=wrong_params")
    assert code == 1
    artifact = Path(summary["artifact"])
    (record,) = records(artifact).values()
    assert record["status"] == "invalid" and record["throughput"] is None and record["apparent_throughput"] > 0
    written = json.loads((artifact / "summary.json").read_text())
    (row,) = written["runs"]
    assert row["apparent_throughput"] == record["apparent_throughput"] and row["work_shortfall"] is None
    (group,) = written["groups"]
    assert group["n"] == 0 and group["apparent"]["n"] == 1 and written["ratios"] == []
    assert validate_artifact(artifact) == []
    ok_code, ok_summary, _ = run_fake(capsys, monkeypatch, tmp_path / "ok", "--engines", "fake", "--precisions", "fp32")
    (ok_record,) = records(Path(ok_summary["artifact"])).values()
    assert ok_code == 0 and ok_record["throughput"] > 0 and ok_record["apparent_throughput"] is None
