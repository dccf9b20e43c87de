"""A matrix in flight at once on the real one-node cluster (.ci/slurm-setup.sh: 2 job slots), with the PyTorch engine:
two runs overlapping in the times Slurm records, a job cancelled from outside, bench SIGKILLed then resumed.

Skipped when no cluster runs here; failed instead when BENCH_REQUIRE_SLURM=1 (CI).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# two repeats of PyTorch fp32 on 96 samples (3 steps of 32): two cheap jobs of one matrix
MATRIX = ["scenario", "run", "scenarios/cifar_resnet50.yaml", "--smoke", "--engines", "pytorch", "--runtime", "slurm",
          "--set", "workload.dataset.samples=96", "--precisions", "fp32", "--repeats", "2"]
R1, R2 = "pytorch-fp32-optimized-b32-d1-r1", "pytorch-fp32-optimized-b32-d1-r2"

if os.environ.get("BENCH_REQUIRE_SLURM") != "1":
    pytest.importorskip("torch")
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("slurm_cluster")]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("BENCH_SLURM_")} | {"BENCH_SLURM_POLL_S": "0.5"}


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-c", "from orchestrator.cli.app import main; main()", *args]


def _bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_argv(*args), capture_output=True, text=True, cwd=REPO, env=_env(), timeout=timeout)


def _start(out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(_argv(*MATRIX, "--out", str(out), *extra), cwd=REPO, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _artifact(out: Path) -> Path:
    found = sorted(out.glob("cifar_resnet50/*"))
    assert len(found) == 1, found
    return found[0]


def _record(artifact: Path, run_id: str) -> dict[str, Any]:
    return json.loads((artifact / "runs" / run_id / "run.json").read_text())


def _job_id(artifact: Path, run_id: str) -> str:
    return json.loads((artifact / "runs" / run_id / "slurm-job.json").read_text())["job_id"]


def _validates(artifact: Path) -> None:
    proc = _bench("results", "validate", str(artifact))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _job_state(job_id: str) -> str:
    proc = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return proc.stdout.strip()


def _wait_for(what: str, check, proc: subprocess.Popen[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc.poll() is not None:
            pytest.fail(f"bench ended before {what}: {proc.communicate()[0][-3000:]}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"{what}: not within {timeout:g} s")


def _engine_started(out: Path, run_id: str) -> bool:
    logs = list(out.glob(f"cifar_resnet50/*/runs/{run_id}/engine.log"))
    return bool(logs) and "[bench-engine]" in logs[0].read_text(errors="replace")


def _our_jobs(artifact: Path) -> list[str]:
    proc = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True, timeout=30)
    return [line for line in proc.stdout.splitlines() if f"bench-{artifact.name}-" in line]


def test_two_runs_of_a_matrix_run_at_once(tmp_path: Path) -> None:
    proc = _bench(*MATRIX, "--out", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    artifact = _artifact(tmp_path)
    first, second = (_record(artifact, run)["runtime"] for run in (R1, R2))
    for runtime in (first, second):
        assert runtime["scheduler_state"] == "COMPLETED" and runtime["node"] and runtime["node_type"], runtime
    # the times Slurm recorded (scontrol show job StartTime/EndTime) overlap: both jobs ran at once
    assert max(first["job_start"], second["job_start"]) < min(first["job_end"], second["job_end"]), (first, second)
    summary = json.loads((artifact / "summary.json").read_text())
    assert summary["counts"] == {"ok": 2}
    assert all("mixed_nodes" not in group["warning_ids"] for group in summary["groups"])  # one node, one kind
    _validates(artifact)


def test_a_job_cancelled_from_outside_is_a_failure_of_its_run(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    _wait_for("the first run's engine started, both jobs submitted",
              lambda: _engine_started(tmp_path, R1) and bool(list(tmp_path.glob(f"cifar_resnet50/*/runs/{R2}/slurm-job.json"))), proc)
    artifact = _artifact(tmp_path)
    job = _job_id(artifact, R1)
    subprocess.run(["scancel", job], check=True, timeout=30)  # someone else cancels it
    output, _ = proc.communicate(timeout=240)
    assert proc.returncode == 1, output[-3000:]  # a bad run, not an interrupted scenario
    cancelled, other = _record(artifact, R1), _record(artifact, R2)
    assert cancelled["status"] == "failed" and f"Slurm job {job} ended CANCELLED" in cancelled["reason"], cancelled
    assert cancelled["runtime"]["scheduler_state"] == "CANCELLED" and cancelled["runtime"]["job_id"] == job
    assert other["status"] == "ok", other
    assert json.loads((artifact / "manifest.json").read_text())["complete"] is True
    _validates(artifact)
    assert _our_jobs(artifact) == []


def test_a_killed_bench_is_resumed_onto_its_jobs(tmp_path: Path) -> None:
    """SIGKILL while run 1's job runs and run 2's waits on the cap (1): resume follows both jobs, submits none."""
    proc = _start(tmp_path, "--slurm-max-concurrent", "1")
    _wait_for("the first run's engine started, both jobs submitted",
              lambda: _engine_started(tmp_path, R1) and bool(list(tmp_path.glob(f"cifar_resnet50/*/runs/{R2}/slurm-job.json"))), proc)
    artifact = _artifact(tmp_path)
    jobs = {run: _job_id(artifact, run) for run in (R1, R2)}
    assert _job_state(jobs[R2]) == "PENDING"  # held by its dependency on run 1's job
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    _validates(artifact)  # a valid, incomplete artifact: both runs in flight
    assert json.loads((artifact / "manifest.json").read_text())["complete"] is False
    resumed = _bench("scenario", "resume", str(artifact), timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    said = " ".join(resumed.stderr.split())
    assert f"Slurm job {jobs[R2]} still pending: reattached" in said or f"Slurm job {jobs[R2]} still running: reattached" in said, said
    for run, job in jobs.items():
        record = _record(artifact, run)
        assert record["status"] == "ok" and record["runtime"]["job_id"] == job, record  # the same job, not resubmitted
    assert not (artifact / "attempts").exists()
    assert json.loads((artifact / "summary.json").read_text())["counts"] == {"ok": 2}
    assert json.loads((artifact / "manifest.json").read_text())["complete"] is True
    _validates(artifact)
    assert _our_jobs(artifact) == []
