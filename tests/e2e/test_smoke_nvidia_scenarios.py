"""End to end: the smoke profiles of NVIDIA's ResNet-50 training and inference scenarios (PyTorch, CPU)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def run_smoke(scenario: str, out: Path) -> dict:
    proc = subprocess.run(
        ["bench", "scenario", "run", str(REPO / "scenarios" / scenario), "--smoke", "--engines", "pytorch",
         "--runtime", "local", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    check = subprocess.run(["bench", "results", "validate", summary["artifact"]], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    return summary


def test_training_smoke_with_scaling_and_time_to_train(tmp_path, data_dir):
    summary = run_smoke("imagenet_resnet50.yaml", tmp_path)
    assert {run["devices"] for run in summary["runs"]} == {1, 2}
    assert all(run["status"] == "ok" for run in summary["runs"])
    groups = [g for g in summary["groups"] if g["throughput"]]
    assert groups and all(g["time_to_train_h"] > 0 and g["gmacs_per_sample"] > 0 for g in groups)
    assert {s["devices"] for s in summary["scaling"]} == {1, 2}


def test_inference_smoke_reports_latency_per_batch_size(tmp_path, data_dir):
    summary = run_smoke("imagenet_resnet50_inference.yaml", tmp_path)
    assert {run["batch_per_device"] for run in summary["runs"]} == {1, 4}
    for group in summary["groups"]:
        latency = group["latency_ms"]
        assert latency["p50"] <= latency["p90"] <= latency["p95"] <= latency["p99"]
        assert latency["mean"] > 0
