"""End to end: the README's main job — the seed scenario's smoke profile on all three engines, CPU, local runtime."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
ENGINES = ("pytorch", "tensorflow", "jax")


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory, data_dir) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("e2e")
    proc = subprocess.run(
        ["bench", "scenario", "run", str(REPO / "scenarios" / "cifar_resnet50.yaml"), "--smoke", "--runtime", "local",
         "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    return Path(summary["artifact"]), summary


def test_every_run_is_valid_and_the_artifact_validates(artifact):
    folder, summary = artifact
    assert summary["smoke"] is True and summary["counts"] == {"ok": 6}
    check = subprocess.run(["bench", "results", "validate", str(folder)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    show = subprocess.run(["bench", "results", "show", str(folder), "--wide"], capture_output=True, text=True)
    assert show.returncode == 0 and "jax-bf16-optimized-b32-d1-r1" in show.stdout


def test_engines_did_the_same_work(artifact):
    folder, summary = artifact
    for precision in ("fp32", "bf16"):
        works = {}
        for engine in ENGINES:
            run_dir = next(folder.glob(f"runs/{engine}-{precision}-*"))
            spec = json.loads((run_dir / "spec.json").read_text())
            result = json.loads((run_dir / "result.json").read_text())
            record = json.loads((run_dir / "run.json").read_text())
            assert spec["smoke"] is True and record["status"] == "ok" and record["parity"]["ok"]
            assert record["runtime"]["name"] == "local" and (run_dir / "engine.log").read_text().strip()
            assert result["measurements"]["steady"]["throughput"] > 0 and result["measurements"]["setup_s"] > 0
            assert result["work"]["precision"]["name"] == precision
            works[engine] = result["work"]
        for field in ("trainable_parameters", "samples", "steps", "epochs", "dataset_sha256", "batch_global", "world_size"):
            values = {engine: work[field] for engine, work in works.items()}
            assert len(set(values.values())) == 1, (precision, field, values)
        assert works["pytorch"]["trainable_parameters"] == 23528522
    # same shared weights, same batches, same updates: the fp32 losses of every step agree within the fp32 tolerance
    fp32 = [v for v in summary["numerical_parity"] if v["precision"] == "fp32" and v["kind"] == "steps"]
    assert len(fp32) == 3 and all(v["verdict"] == "ok" and v["steps"] >= 5 for v in fp32), fp32
    # and the mean loss of every harness block, over the whole run
    blocks = [v for v in summary["numerical_parity"] if v["precision"] == "fp32" and v["kind"] == "block_means"]
    assert len(blocks) == 3 and all(v["verdict"] == "ok" and v["blocks"] >= 1 for v in blocks), blocks
    ratios = {(r["precision"], r["engine"], r["baseline_engine"]) for r in summary["ratios"]}
    # one ratio per engine against the reference engine (the scenario's first: pytorch), never both directions
    assert ("bf16", "jax", "pytorch") in ratios and ("fp32", "tensorflow", "pytorch") in ratios
    assert all(vs == "pytorch" for _, _, vs in ratios)
