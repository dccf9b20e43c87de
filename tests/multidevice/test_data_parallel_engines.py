"""Data parallelism end to end on CPU: ``bench scenario run ... --devices 2`` with the real engines.

PyTorch runs 2 worker processes (DistributedDataParallel over gloo); JAX shards over 2 forced
host devices; TensorFlow mirrors over 2 logical CPU devices. The smoke profile of
cifar_resnet50 has 192 samples and 32 per device: one device takes 6 steps of 32, two devices
3 steps of 64, and drop_last leaves nothing behind either way, so both see the same 192
samples per epoch.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
SCENARIO = str(REPO / "scenarios" / "cifar_resnet50.yaml")


def bench_run(out: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> tuple[int, dict[str, Any], str]:
    """``bench scenario run <cifar smoke> --runtime local --precisions fp32 ARGS --json``: (exit code, summary, stderr)."""
    proc = subprocess.run(["bench", "scenario", "run", SCENARIO, "--smoke", "--precisions", "fp32", "--runtime", "local",
                           "--out", str(out), "--json", *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    try:
        summary = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"bench printed no summary (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.returncode, summary, proc.stderr


def run_files(summary: dict[str, Any], run_id: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    run_dir = Path(summary["artifact"]) / "runs" / run_id
    return tuple(json.loads((run_dir / name).read_text()) for name in ("spec.json", "result.json", "run.json"))  # type: ignore[return-value]


def per_epoch(result: dict[str, Any]) -> list[int]:
    return [epoch["samples"] for epoch in result["measurements"]["epochs"]]


@pytest.fixture(scope="module")
def single_device(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same smoke scenario on one device (PyTorch): the reference for samples per epoch."""
    code, summary, err = bench_run(tmp_path_factory.mktemp("d1"), "--engines", "pytorch", "--devices", "1")
    assert code == 0 and summary["counts"] == {"ok": 1}, err[-3000:]
    spec, result, _ = run_files(summary, "pytorch-fp32-optimized-b32-d1-r1")
    assert (result["work"]["world_size"], result["work"]["batch_global"], spec["parity"]["steps_per_epoch"]) == (1, 32, 6)
    return {"spec": spec, "result": result}


def check_two_devices(spec: dict[str, Any], result: dict[str, Any], record: dict[str, Any], single: dict[str, Any]) -> None:
    parity, work, measured = spec["parity"], result["work"], result["measurements"]
    assert record["status"] == "ok" and record["parity"]["ok"], record
    # the spec and the result both state devices, the per-device and the global batch
    assert parity["devices"] == 2 and parity["batch"] == {"per_device": 32, "global": 64, "drop_last": True}
    assert (work["world_size"], work["batch_per_device"], work["batch_global"]) == (2, 32, 64)
    # twice the global batch over the same dataset: half the steps, the same samples per epoch
    assert parity["steps_per_epoch"] == single["spec"]["parity"]["steps_per_epoch"] // 2 == 3
    assert per_epoch(result) == per_epoch(single["result"]) == [192]
    assert work["samples"] == single["result"]["work"]["samples"] == 192 and work["steps"] == 3
    assert work["optimizations"]["data_parallel"]["applied"] is True
    assert len(result["environment"]["devices"]) == 2 and result["environment"]["device_kind"] == "cpu"
    steady = measured["steady"]
    assert steady["samples"] == 64 and steady["throughput"] == pytest.approx(steady["samples"] / steady["time_s"])


def test_pytorch_two_processes(single_device: dict[str, Any], tmp_path: Path) -> None:
    code, summary, err = bench_run(tmp_path, "--engines", "pytorch", "--devices", "2")
    assert code == 0 and summary["counts"] == {"ok": 1}, err[-3000:]
    spec, result, record = run_files(summary, "pytorch-fp32-optimized-b32-d2-r1")
    check_two_devices(spec, result, record, single_device)
    workers = result["measurements"]["workers"]
    assert [w["rank"] for w in workers] == [0, 1]
    # all workers' samples over the slowest worker's time
    assert result["measurements"]["steady"]["time_s"] >= max(w["steady_time_s"] for w in workers)
    assert result["environment"]["extra"]["distributed"] == {
        "world_size": 2, "processes": 2, "backend": "gloo", "launcher": "bench_engine.launch (torchrun-style env)",
        "nccl_nvls_enable": "0"}
    assert "DistributedDataParallel, 2 processes" in result["work"]["optimizations"]["data_parallel"]["detail"]
    log = (Path(summary["artifact"]) / "runs" / record["run_id"] / "engine.log").read_text()
    assert "[rank 0]" in log and "[rank 1]" in log
    assert subprocess.run(["bench", "results", "validate", summary["artifact"]], capture_output=True).returncode == 0
    scaling = summary["scaling"]  # a 2-device run without a 1-device run in the same artifact
    assert [(r["devices"], r["speedup"]) for r in scaling] == [(2, None)] and "1-device" in scaling[0]["note"]


def test_jax_and_tensorflow_two_devices(single_device: dict[str, Any], tmp_path: Path) -> None:
    code, summary, err = bench_run(tmp_path, "--engines", "jax,tensorflow", "--devices", "2")
    assert code == 0 and summary["counts"] == {"ok": 2}, err[-3000:]
    assert summary["cross_engine_parity"] == []
    for engine in ("jax", "tensorflow"):
        spec, result, record = run_files(summary, f"{engine}-fp32-optimized-b32-d2-r1")
        check_two_devices(spec, result, record, single_device)
    _, jax_result, _ = run_files(summary, "jax-fp32-optimized-b32-d2-r1")
    assert "Mesh of 2 cpu devices" in jax_result["work"]["optimizations"]["data_parallel"]["detail"]
    assert "--xla_force_host_platform_device_count=2" in jax_result["environment"]["extra"]["xla_flags"]
    _, tf_result, _ = run_files(summary, "tensorflow-fp32-optimized-b32-d2-r1")
    assert tf_result["environment"]["extra"]["distribute"]["strategy"] == "MirroredStrategy"
    assert tf_result["environment"]["extra"]["distribute"]["devices"] == ["/CPU:0", "/CPU:1"]


def test_pytorch_worker_crash_fails_without_hanging(data_dir: Path, tmp_path: Path) -> None:
    clock = time.monotonic()
    code, summary, err = bench_run(tmp_path, "--engines", "pytorch", "--devices", "2", env={"BENCH_FAULT": "1:2"}, timeout=300)
    elapsed = time.monotonic() - clock
    assert code == 1 and summary["counts"] == {"failed": 1}, err[-3000:]
    _, result, record = run_files(summary, "pytorch-fp32-optimized-b32-d2-r1")
    assert result["status"] == "failed" and result["failure"]["kind"] == "crash"
    assert result["failure"]["message"].startswith("rank 1 of 2 exited with code 3 without writing a result")
    assert record["status"] == "failed" and record["reason"].startswith("crash: rank 1 of 2")
    assert elapsed < 120  # the surviving rank is stopped, nothing waits for a collective timeout


def test_pytorch_rank_blocked_in_the_collective_fails_as_stalled(data_dir: Path, tmp_path: Path) -> None:
    """Rank 1 blocks at its 2nd step (SIGTERM masked); rank 0 waits for it in DDP's gloo collective.

    The launcher sees no progress for stall_s, prints every rank's Python stacks into the engine
    log, ends both workers and the run fails as stalled, long before gloo's own timeout (900 s).
    """
    stall_s = 25
    clock = time.monotonic()
    code, summary, err = bench_run(tmp_path, "--engines", "pytorch", "--devices", "2", "--set", f"measurement.stall_s={stall_s}",
                                   env={"BENCH_FAULT": "1:2:block"}, timeout=400)
    elapsed = time.monotonic() - clock
    assert code == 1 and summary["counts"] == {"failed": 1}, err[-3000:]
    _, result, record = run_files(summary, "pytorch-fp32-optimized-b32-d2-r1")
    assert result["failure"]["kind"] == "stalled", result["failure"]
    # both ranks stop at the same step (one blocked, one waiting for it): both are named, with the phase
    assert record["reason"].startswith("stalled: ranks 0, 1 of 2 stalled in warmup: no progress for"), record["reason"]
    assert "after step 1/2 of the phase" in record["reason"]
    log = (Path(summary["artifact"]) / "runs" / record["run_id"] / "engine.log").read_text()
    assert "[bench-engine] asking every running worker for its Python stacks" in log
    rank0 = [line for line in log.splitlines() if line.startswith("[rank 0]   File")]
    assert any("in train_step" in line for line in rank0), "\n".join(rank0)  # rank 0 is inside the DDP step
    assert any("in faulty_step" in line for line in log.splitlines() if line.startswith("[rank 1]   File"))
    assert "[rank 0] [bench-engine] phase rendezvous" in log and "[rank 1] [bench-engine] phase warmup 1/2" in log
    assert elapsed < 300  # setup on a busy 2-core machine, stall_s, the stacks, the kill
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, str(tmp_path))], "a worker survived"


def _cmdline_has(entry: Path, text: str) -> bool:
    try:
        return text in (entry / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
