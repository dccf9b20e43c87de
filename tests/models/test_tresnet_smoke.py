"""End to end: scenarios/tresnet_m.yaml's smoke profile with the real PyTorch engine on CPU.

The maximal-batch search runs (start 4, limit 16: nothing runs out of memory on a CPU, so the
limit caps it), the run uses 90% of it rounded to the granularity, and the artifact validates.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.model.layers import forward_macs, trainable_parameters

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_tresnet_m_smoke_pytorch_local(tmp_path, data_dir):
    proc = subprocess.run(
        ["bench", "scenario", "run", str(REPO / "scenarios" / "tresnet_m.yaml"), "--smoke", "--engines", "pytorch",
         "--runtime", "local", "--out", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    artifact = Path(summary["artifact"])
    assert summary["smoke"] is True and summary["counts"] == {"ok": 1}
    check = subprocess.run(["bench", "results", "validate", str(artifact)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr

    (search,) = summary["max_batch"]
    assert (search["engine"], search["precision"], search["fraction"]) == ("pytorch", "fp32", 0.9)
    assert [p["batch"] for p in search["probes"]] == [4, 8, 16]
    assert search["max_batch"] == 16 and search["capped_by"] == "limit" and search["chosen_batch"] == 12
    recorded = json.loads((artifact / "maxbatch" / "pytorch-fp32-optimized-d1" / "search.json").read_text())
    assert recorded["max_batch"] == 16

    (run,) = summary["runs"]
    assert run["status"] == "ok" and run["batch_per_device"] == 12
    assert run["gmacs_per_sample"] == pytest.approx(forward_macs("tresnet_m", 1000, 3, 64, 64) / 1e9)
    run_dir = artifact / "runs" / run["run_id"]
    result = json.loads((run_dir / "result.json").read_text())
    record = json.loads((run_dir / "run.json").read_text())
    assert result["work"]["arch"] == "tresnet_m"
    assert result["work"]["trainable_parameters"] == trainable_parameters("tresnet_m", 1000) == 31_389_032
    assert result["work"]["precision"]["name"] == "fp32"
    assert result["measurements"]["steady"]["throughput"] > 0
    assert record["parity"]["ok"]
