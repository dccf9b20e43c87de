"""The slurm runtime on a real one-node cluster (.ci/slurm-setup.sh), with the PyTorch engine.

Skipped when no cluster runs here; failed instead when BENCH_REQUIRE_SLURM=1 (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# 96 samples: 3 steps of 32 (2 warmup, 1 timed), enough for the runtime's paths; PyTorch's bf16 run (the one resume
# runs) takes about 20 s a step on a CPU without bf16 instructions
SMOKE = ["scenario", "run", "scenarios/cifar_resnet50.yaml", "--smoke", "--engines", "pytorch", "--runtime", "slurm",
         "--set", "workload.dataset.samples=96"]
FP32 = "pytorch-fp32-optimized-b32-d1-r1"
BF16 = "pytorch-bf16-optimized-b32-d1-r1"

if os.environ.get("BENCH_REQUIRE_SLURM") != "1":
    pytest.importorskip("torch")
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("slurm_cluster")]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("BENCH_SLURM_")} | {"BENCH_SLURM_POLL_S": "0.5"}


def _bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from orchestrator.cli.app import main; main()", *args],
                          capture_output=True, text=True, cwd=REPO, env=_env(), timeout=timeout)


def _only_artifact(out: Path) -> Path:
    found = sorted(out.glob("cifar_resnet50/*"))
    assert len(found) == 1, found
    return found[0]


def _record(artifact: Path, run_id: str) -> dict[str, Any]:
    return json.loads((artifact / "runs" / run_id / "run.json").read_text())


def _validates(artifact: Path) -> None:
    proc = _bench("results", "validate", str(artifact))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _our_jobs(artifact: Path) -> list[str]:
    """Jobs of this artifact still known to squeue (any state)."""
    proc = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if f"bench-{artifact.name}-" in line]


@pytest.fixture(scope="module")
def smoke_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CI smoke run: pytorch fp32 through --runtime slurm (the local environment inside the job)."""
    out = tmp_path_factory.mktemp("slurm-smoke")
    proc = _bench(*SMOKE, "--precisions", "fp32", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _only_artifact(out)


@pytest.fixture(scope="module")
def interrupted_artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """fp32 and bf16 (both jobs submitted at once); SIGINT (Ctrl-C) to bench while the first job's engine runs."""
    out = tmp_path_factory.mktemp("slurm-interrupt")
    proc = subprocess.Popen([sys.executable, "-c", "from orchestrator.cli.app import main; main()", *SMOKE,
                             "--precisions", "fp32,bf16", "--out", str(out)],
                            cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 180
    log = None
    while time.monotonic() < deadline and proc.poll() is None:
        logs = list(out.glob(f"cifar_resnet50/*/runs/{FP32}/engine.log"))
        if logs and "[bench-engine]" in logs[0].read_text(errors="replace"):
            log = logs[0]
            break
        time.sleep(0.2)
    assert log is not None, f"the first job never started its engine: {proc.communicate(timeout=60)[0][-3000:] if proc.poll() is not None else 'timeout'}"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=180)
    return _only_artifact(out), proc.returncode, output


def test_smoke_run_records_the_job(smoke_artifact: Path) -> None:
    _validates(smoke_artifact)
    record = _record(smoke_artifact, FP32)
    assert record["status"] == "ok", record
    runtime = record["runtime"]
    assert runtime["name"] == "slurm" and runtime["mode"] == "local" and runtime["job_id"].isdigit()
    assert runtime["scheduler_state"] == "COMPLETED" and runtime["exit_code"] == "0:0" and runtime["node"]
    assert runtime["interpreter"]
    run_dir = smoke_artifact / "runs" / FP32
    assert f"#SBATCH --output={run_dir / 'engine.log'}" in (run_dir / "slurm-job.sh").read_text()
    log = (run_dir / "engine.log").read_text()
    assert f"bench: slurm job {runtime['job_id']} on {runtime['node']}" in log and "[bench-engine]" in log
    summary = json.loads((smoke_artifact / "summary.json").read_text())
    assert summary["counts"] == {"ok": 1}
    assert json.loads((smoke_artifact / "manifest.json").read_text())["complete"] is True
    assert _our_jobs(smoke_artifact) == []


def test_ctrl_c_cancels_the_job_and_keeps_records(interrupted_artifact) -> None:
    artifact, code, output = interrupted_artifact
    assert code == 130, output[-3000:]
    first, second = _record(artifact, FP32), _record(artifact, BF16)
    assert first["status"] == "interrupted", first
    assert first["runtime"]["name"] == "slurm" and first["runtime"]["job_id"].isdigit()
    assert first["runtime"]["scheduler_state"] == "CANCELLED"
    # submitted up front with the first (both in flight on the node's 2 slots): cancelled too
    assert second["status"] == "interrupted" and "cancelled" in second["reason"], second
    assert second["runtime"]["job_id"].isdigit() and second["runtime"]["scheduler_state"] == "CANCELLED"
    _validates(artifact)
    assert json.loads((artifact / "manifest.json").read_text())["complete"] is False
    assert _our_jobs(artifact) == []  # scancel'ed and gone from the queue


def test_timeout_cancels_the_job(tmp_path: Path) -> None:
    proc = _bench(*SMOKE, "--precisions", "fp32", "--set", "measurement.timeout_s=2", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    artifact = _only_artifact(tmp_path)
    record = _record(artifact, FP32)
    assert record["status"] == "timeout" and "exceeded the 2 s timeout; Slurm job" in record["reason"]
    assert record["runtime"]["scheduler_state"] == "CANCELLED" and record["runtime"]["job_id"].isdigit()
    _validates(artifact)
    assert _our_jobs(artifact) == []


def test_resume_runs_only_what_is_missing(smoke_artifact: Path, interrupted_artifact, tmp_path: Path) -> None:
    """An artifact with a valid fp32 run and an interrupted bf16 run: resume runs bf16 only."""
    source, _, _ = interrupted_artifact
    artifact = tmp_path / "cifar_resnet50" / source.name
    shutil.copytree(source, artifact)
    shutil.rmtree(artifact / "runs" / FP32)
    shutil.copytree(smoke_artifact / "runs" / FP32, artifact / "runs" / FP32)  # a valid result of the same scenario
    kept = (artifact / "runs" / FP32 / "run.json").read_text()
    # the spliced-in run is a change bench did not write: resume refuses it unless forced (and records that)
    assert _bench("scenario", "resume", str(artifact)).returncode == 2
    # a run is adopted only on files the manifest sealed: whether Ctrl-C let the interrupted fp32 engine write its
    # (interrupted) result first is a matter of timing; when it did not, resume rightly runs fp32 again too
    listed = {item["path"] for item in json.loads((source / "manifest.json").read_text())["files"]}
    sealed = {f"runs/{FP32}/run.json", f"runs/{FP32}/result.json"} <= listed
    proc = _bench("scenario", "resume", str(artifact), "--force")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if sealed:
        assert (artifact / "runs" / FP32 / "run.json").read_text() == kept
        assert not (artifact / "attempts" / FP32).exists()
    else:
        again = _record(artifact, FP32)
        assert again["status"] == "ok" and again["runtime"]["job_id"] != json.loads(kept)["runtime"]["job_id"]
        assert (artifact / "attempts" / FP32).is_dir()  # the spliced-in run kept aside, not adopted
    rerun = _record(artifact, BF16)
    assert rerun["status"] == "ok" and rerun["runtime"]["name"] == "slurm" and rerun["runtime"]["job_id"].isdigit()
    old = json.loads((artifact / "attempts" / BF16 / "1" / "run.json").read_text())
    assert old["status"] == "interrupted"
    summary = json.loads((artifact / "summary.json").read_text())
    assert summary["counts"] == {"ok": 2} and summary["artifact_id"] == source.name
    _validates(artifact)
    assert json.loads((artifact / "manifest.json").read_text())["complete"] is True
