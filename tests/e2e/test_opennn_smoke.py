"""End to end, OpenNN: the real CPU driver on a spec, the seed protocol's smoke next to PyTorch,
and a driver that hangs or crashes under `bench scenario run` (stand-in driver, no build needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO
from tests.toolchains import unavailable

pytestmark = pytest.mark.e2e
SCENARIO = REPO / "scenarios" / "opennn_seed.yaml"
FAKE_DRIVER = FIXTURES / "opennn" / "fake_driver.py"


def built_cpu_driver() -> bool:
    sys.path.insert(0, str(REPO / "images" / "opennn"))
    from bench_opennn.locate import cached_variants

    return "cpu" in cached_variants()


@pytest.fixture(scope="module")
def opennn_cpu() -> None:
    if os.environ.get("BENCH_OPENNN_DRIVER"):
        pytest.skip("BENCH_OPENNN_DRIVER points at a driver of its own")
    if not built_cpu_driver():
        unavailable("OPENNN", "OpenNN's CPU driver is not built (bench env create opennn; README \"OpenNN\")")


def bench(*args: str, env: dict[str, str] | None = None, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})}, timeout=timeout)


def test_real_driver_trains_and_reads_back(opennn_cpu, make_spec, run_engine) -> None:
    from tests.parity_docs import check_against_spec

    spec = make_spec("opennn", batch=16, steps_per_epoch=3, warmup=1)
    spec["parity"]["optimizer"] = {"name": "adam", "lr": 0.001, "betas": [0.9, 0.999], "eps": 1.1920928955078125e-07, "weight_decay": 0.0}
    spec["measurement"]["window_steps"] = 1
    code, result, log = run_engine(spec, timeout=1200)
    assert code == 0, log[-3000:]
    work, measured = result["work"], result["measurements"]
    assert work["trainable_parameters"] == 23528522 and work["num_classes"] == 10 and work["input_shape"] == [32, 32, 3]
    assert work["steps"] == 3 and work["optimizations"]["optimizer_steps"]["applied"] is True  # Adam's own counter
    assert "6 alignment padding" in work["optimizations"]["parameter_buffer"]["detail"]
    assert work["precision"]["compute_dtype"] == "float32" and work["precision"]["name"] == "fp32"
    assert measured["warmup_steps"] == 1 and len(measured["windows"]) == 2 and measured["steady"]["throughput"] > 0
    assert measured["loss_first"] and 0.5 < measured["loss_first"] < 10  # cross-entropy of 10 classes starts near ln 10
    assert "AdaptiveMomentEstimation" in result["environment"]["extra"]["optimizer_json"]
    assert check_against_spec(spec, result, "cpu") == []


def test_real_driver_refuses_what_opennn_cannot_do(opennn_cpu, make_spec, run_engine) -> None:
    spec = make_spec("opennn", precision="bf16", batch=16, steps_per_epoch=2, warmup=1)
    code, result, _ = run_engine(spec, timeout=600)
    assert code == 1 and result["failure"]["kind"] == "unsupported" and "bf16" in result["failure"]["message"]
    spec = make_spec("opennn", batch=16, steps_per_epoch=2, warmup=1)
    spec["parity"]["optimizer"] = {"name": "adam", "lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}
    code, result, _ = run_engine(spec, timeout=600)
    assert code == 1 and result["failure"]["kind"] == "unsupported" and "EPSILON" in result["failure"]["message"]


def test_seed_protocol_smoke_next_to_pytorch_and_jax(opennn_cpu, tmp_path: Path, data_dir) -> None:
    proc = bench("scenario", "run", str(SCENARIO), "--smoke", "--engines", "opennn,pytorch,jax", "--runtime", "local",
                 "--out", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    assert summary["counts"] == {"ok": 3}, summary["counts"]
    folder = Path(summary["artifact"])
    moved = {}
    for engine in ("opennn", "pytorch", "jax"):
        record = json.loads(next(folder.glob(f"runs/{engine}-*/run.json")).read_text())
        assert record["status"] == "ok" and record["parity"]["ok"], record.get("parity")
        result = json.loads(next(folder.glob(f"runs/{engine}-*/result.json")).read_text())
        moved[engine] = result["work"]["weight_change"]["relative"]
    # the same updates from the same weights move them equally far (measured to 4 digits)
    assert max(moved.values()) - min(moved.values()) < 1e-3 * max(moved.values()), moved
    # same shared weights, same batches, same Adam: every recorded loss within the fp32 tolerance (measured 3.4e-4)
    pairs = [["jax", "opennn"], ["jax", "pytorch"], ["opennn", "pytorch"]]
    for kind in ("steps", "block_means"):
        rows = sorted((v for v in summary["numerical_parity"] if v["kind"] == kind), key=lambda v: v["engines"])
        assert [v["engines"] for v in rows] == pairs, rows
        assert all(v["verdict"] == "ok" for v in rows), rows
        assert all(v["steps" if kind == "steps" else "blocks"] >= 3 for v in rows), rows
    report = bench("results", "report", str(folder), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Claimed vs measured ratios" in text and "1.90x" in text


@pytest.mark.parametrize("behaviour,status", [("hang", "timeout"), ("crash", "failed")])
def test_a_hanging_or_crashing_driver_ends_the_run_with_its_log(behaviour: str, status: str, tmp_path: Path, data_dir) -> None:
    env = {"BENCH_OPENNN_DRIVER": str(FAKE_DRIVER), "BENCH_FAKE_OPENNN": behaviour}
    proc = bench("scenario", "run", str(SCENARIO), "--smoke", "--engines", "opennn", "--runtime", "local", "--out", str(tmp_path),
                 "--set", "measurement.timeout_s=20", "--json", env=env, timeout=300)
    summary = json.loads(proc.stdout)
    folder = Path(summary["artifact"])
    run_dir = next(folder.glob("runs/opennn-*"))
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == status, record
    assert "fake driver: " in (run_dir / "engine.log").read_text()  # the driver's own output is kept
    assert list((run_dir / "opennn").glob("*events.txt"))  # and its events file
    check = bench("results", "validate", str(folder))
    assert check.returncode == 0, check.stderr
