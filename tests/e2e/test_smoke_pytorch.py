"""End to end: the seed scenario's smoke profile with the real PyTorch engine on CPU, local runtime."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_smoke_run_pytorch_local(tmp_path, data_dir):
    proc = subprocess.run(
        ["bench", "scenario", "run", str(REPO / "scenarios" / "cifar_resnet50.yaml"), "--smoke", "--engines", "pytorch",
         "--runtime", "local", "--out", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    artifact = Path(summary["artifact"])
    assert summary["smoke"] is True and summary["counts"] == {"ok": 2}
    check = subprocess.run(["bench", "results", "validate", str(artifact)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    for precision in ("fp32", "bf16"):
        run_dir = next(artifact.glob(f"runs/pytorch-{precision}-*"))
        spec = json.loads((run_dir / "spec.json").read_text())
        result = json.loads((run_dir / "result.json").read_text())
        record = json.loads((run_dir / "run.json").read_text())
        assert spec["smoke"] is True
        assert result["work"]["trainable_parameters"] == 23528522
        assert result["work"]["samples"] == spec["parity"]["total_steps"] * spec["parity"]["batch"]["global"]
        assert result["work"]["precision"]["name"] == precision
        assert result["measurements"]["steady"]["throughput"] > 0
        assert result["measurements"]["setup_s"] > 0 and result["measurements"]["warmup_s"] > 0
        assert record["status"] == "ok" and record["parity"]["ok"] and record["runtime"]["name"] == "local"
        assert (run_dir / "engine.log").read_text().strip()
    show = subprocess.run(["bench", "results", "show", str(artifact)], capture_output=True, text=True)
    assert show.returncode == 0 and "pytorch-bf16-optimized-b32-d1-r1" in show.stdout
