"""benchmarks/inference_table.py: NVIDIA's inference table from a summary, and its goal check."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "inference_table.py"


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("inference_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["inference_table"] = module
    spec.loader.exec_module(module)
    return module


def group(engine: str, precision: str, batch: int, median: float, p99: float) -> dict:
    return {"engine": engine, "precision": precision, "batch_per_device": batch, "devices": 1, "n": 5, "n_total": 5,
            "throughput": {"median": median, "min": median * 0.99, "max": median * 1.01},
            "latency_ms": {"mean": p99 * 0.8, "p50": p99 * 0.8, "p90": p99 * 0.9, "p95": p99 * 0.95, "p99": p99}}


def summary(groups: list[dict]) -> dict:
    return {"host": {"nvml": {"gpus": [{"name": "NVIDIA H200"}]}}, "groups": groups}


def test_the_table_sits_beside_the_reference_rows_of_its_precision(table):
    doc = summary([group("pytorch", "bf16", 1, 1676.0, 0.625), group("jax", "bf16", 1, 419.0, 3.79),
                   group("pytorch", "tf32", 256, 24013.0, 11.5)])
    text = table.markdown(table.read_cells(doc), json.loads(table.REFERENCE.read_text())["tables"], table.machine_name(doc))
    bf16 = text.split("### bf16")[1]
    assert "Mixed Precision" in bf16 and "| 1 | 78 | 12.78 / 13.27 / 14.36 |" in bf16  # the V100 AMP row
    assert "H200 jax img/s" in bf16 and "1,676 [1,659-1,693], 5/5" in bf16 and "0.500 / 0.594 / 0.625" in bf16
    assert "| 256 | 1,261 | 214.48 / 202.51 / 202.88 |" in text.split("### tf32")[1]  # tf32 beside FP32


def test_goals_fail_on_a_slow_batch_1_p99_or_a_short_batch_256(table):
    met = [group("pytorch", "bf16", 1, 1676.0, 0.625), group("pytorch", "bf16", 256, 25100.0, 11.0)]
    assert table.missed_goals(table.read_cells(summary(met))) == []
    missed = table.missed_goals(table.read_cells(summary([group("jax", "bf16", 1, 419.0, 1.5),
                                                           group("jax", "bf16", 256, 24999.0, 16.0)])))
    assert len(missed) == 2 and "p99 1.500 ms" in missed[0] and "24,999 img/s" in missed[1]
    tf32 = [group("jax", "tf32", 1, 419.0, 3.79), group("jax", "tf32", 256, 14889.0, 17.9)]
    assert table.missed_goals(table.read_cells(summary(met + tf32))) == []  # the goals are the bf16 rows'


def test_the_command_exits_1_on_a_missed_goal_and_2_without_an_artifact(tmp_path: Path):
    (tmp_path / "summary.json").write_text(json.dumps(summary([group("jax", "bf16", 1, 419.0, 3.79)])))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--goals"], capture_output=True, text=True)
    assert proc.returncode == 1 and "goal missed: jax bf16 b1" in proc.stdout
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no summary.json" in proc.stderr


def test_artifacts_of_one_engine_each_make_one_table_and_a_cell_held_twice_is_refused(tmp_path: Path):
    pytorch, jax, again, other = (tmp_path / name for name in ("pytorch", "jax", "again", "other"))
    for folder, groups in ((pytorch, [group("pytorch", "bf16", 1, 1676.0, 0.625)]), (jax, [group("jax", "bf16", 1, 419.0, 3.79)]),
                           (again, [group("jax", "bf16", 1, 500.0, 2.0)])):
        folder.mkdir()
        (folder / "summary.json").write_text(json.dumps(summary(groups)))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(pytorch), str(jax)], capture_output=True, text=True)
    assert proc.returncode == 0 and "H200 pytorch img/s" in proc.stdout and "H200 jax img/s" in proc.stdout
    proc = subprocess.run([sys.executable, str(SCRIPT), str(jax), str(again)], capture_output=True, text=True)
    assert proc.returncode == 2 and "jax bf16 b1 is already in another artifact" in proc.stderr
    other.mkdir()
    (other / "summary.json").write_text(json.dumps({**summary([group("pytorch", "tf32", 1, 1.0, 1.0)]),
                                                    "host": {"nvml": {"gpus": [{"name": "NVIDIA H100"}]}}}))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(pytorch), str(other)], capture_output=True, text=True)
    assert proc.returncode == 2 and "different machines (H100, H200)" in proc.stderr
