"""GPU telemetry with and without NVML, through a fake ``pynvml`` module (no GPU needed)."""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import pytest

from orchestrator.host import telemetry
from orchestrator.host.gpus import GpuRequest
from orchestrator.schemas import validate
from tests.results.fake_nvml import FakeGpu, NVMLError_LibraryNotFound, make_module
from tests.typed_docs import summarize_docs as summarize


def _run_dir(tmp_path: Path, device: str = "auto", devices: int = 1) -> Path:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps({"device": device, "parity": {"devices": devices}}))
    return run_dir


def _monitor_run(run_dir: Path, request: GpuRequest | None = None, seconds: float = 0.3) -> dict:
    monitor = telemetry.GpuTelemetry(interval_s=0.02)
    monitor.start(run_dir, request or GpuRequest())
    time.sleep(seconds)
    return monitor.stop().to_json()  # the run record's block


def test_without_nvidia_ml_py(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    run_dir = _run_dir(tmp_path)
    out = _monitor_run(run_dir, seconds=0.05)
    assert out == {"available": False, "reason": "nvidia-ml-py is not installed"}
    assert not (run_dir / "telemetry.csv").exists()


def test_without_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", make_module(init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found")))
    run_dir = _run_dir(tmp_path)
    out = _monitor_run(run_dir, seconds=0.05)
    assert out["available"] is False and "NVML unavailable (NVMLError_LibraryNotFound)" in out["reason"]
    assert not (run_dir / "telemetry.csv").exists()


def test_no_gpu_and_cpu_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", make_module(gpus=[]))
    out = _monitor_run(_run_dir(tmp_path), seconds=0.05)
    assert out["available"] is False and "no GPU" in out["reason"]
    fake = make_module()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    cpu_dir = _run_dir(tmp_path / "cpu", device="cpu")
    out = _monitor_run(cpu_dir, seconds=0.05)
    assert out["available"] is False and "CPU" in out["reason"]
    assert fake.calls["init"] == 0 and not (cpu_dir / "telemetry.csv").exists()
    assert _monitor_run(_run_dir(tmp_path / "off"), GpuRequest(sampled=False), 0.01)["reason"].startswith("disabled")


def test_sampler_with_energy_counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = make_module([FakeGpu(power_mw=300_000)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    run_dir = _run_dir(tmp_path)
    started = time.monotonic()
    out = _monitor_run(run_dir, seconds=0.4)
    elapsed = time.monotonic() - started
    assert out["available"] is True and out["csv"] == "telemetry.csv"
    assert out["samples"] >= 3 and out["gpus"] == [0]
    assert out["energy_method"] == "energy_counter"
    assert 300 * 0.2 <= out["energy_j"] <= 300 * elapsed * 1.05  # 300 W over the sampled time
    assert out["power_w"] == {"mean": 300.0, "max": 300.0}
    assert out["util_pct"]["mean"] == 97.0
    assert out["throttle_reasons_seen"] == ["sw_power_cap"]
    assert out["driver"] == "570.86.15" and out["cuda_driver"] == "12.8"
    facts = out["devices"][0]
    assert facts["name"] == "NVIDIA H200" and facts["uuid"].startswith("GPU-")
    assert facts["power_limit_w"] == 700.0 and facts["sm_clock_max_mhz"] == 1980
    assert (facts["persistence_mode"], facts["mig_mode"], facts["ecc_mode"]) == (1, 0, 1)
    assert facts["compute_capability"] == "9.0" and facts["memory_total_bytes"] == 141 * 2**30
    assert fake.calls["init"] == fake.calls["shutdown"] == 1
    with open(run_dir / "telemetry.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(telemetry.CSV_COLUMNS)
    assert len(rows) == out["samples"]
    assert float(rows[0]["power_w"]) == 300.0 and rows[0]["throttle"] == "sw_power_cap"
    times = [float(r["time_s"]) for r in rows]
    assert times == sorted(times) and times[-1] >= 0.2
    validate({"schema_version": 1, "run_id": "r1", "engine": "e", "precision": "bf16", "path": "optimized", "batch_per_device": 1,
              "devices": 1, "repeat": 1, "status": "ok", "runtime": {"name": "local"}, "started_at": "t", "finished_at": "t",
              "wall_s": 1.0, "parity": {"checked": True, "ok": True, "mismatches": []}, "telemetry": {"gpu": out}}, "run-record")


def test_power_integral_and_no_power(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", make_module([FakeGpu(power_mw=200_000, energy_counter=False)]))
    out = _monitor_run(_run_dir(tmp_path), seconds=0.3)
    assert out["energy_method"] == "power_integral"
    rows = telemetry.read_csv(tmp_path / "runs" / "r1" / "telemetry.csv")
    span = rows[-1]["time_s"] - rows[0]["time_s"]
    assert out["energy_j"] == pytest.approx(200 * span, rel=1e-3)
    monkeypatch.setitem(sys.modules, "pynvml", make_module([FakeGpu(power_mw=None, energy_counter=False)]))
    out = _monitor_run(_run_dir(tmp_path / "b"), seconds=0.1)
    assert out["available"] is True and out["energy_j"] is None and out["energy_method"] is None
    assert any("energy not available" in n for n in out["notes"])


def test_visible_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeGpu(uuid=f"GPU-aaaa000{i}-0000", power_mw=100_000 * (i + 1)) for i in range(3)]
    monkeypatch.setitem(sys.modules, "pynvml", make_module(gpus))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    out = _monitor_run(_run_dir(tmp_path / "a"), GpuRequest(visible=("2", "0")), 0.1)
    assert out["gpus"] == [0, 2] and [d["index"] for d in out["devices"]] == [2, 0]
    assert out["power_w"]["mean"] == 400.0  # 300 W + 100 W, summed per tick
    out = _monitor_run(_run_dir(tmp_path / "b"), GpuRequest(visible=("GPU-aaaa0001",)), 0.1)  # a UUID prefix
    assert out["gpus"] == [1]
    out = _monitor_run(_run_dir(tmp_path / "c"), GpuRequest(environment_visible="1"), 0.1)
    assert out["gpus"] == [1]
    out = _monitor_run(_run_dir(tmp_path / "d"), GpuRequest(visible=("7",)), 0.05)
    assert out["available"] is False and "'7'" in out["reason"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    out = _monitor_run(_run_dir(tmp_path / "f"), GpuRequest(), 0.05)  # a local process inherits it
    assert out["gpus"] == [2]
    out = _monitor_run(_run_dir(tmp_path / "g"), GpuRequest(runtime="docker"), 0.05)  # a container does not
    assert out["gpus"] == [0, 1, 2]
    out = _monitor_run(_run_dir(tmp_path / "h"), GpuRequest(visible=()), 0.05)
    assert out["gpus"] == [0, 1, 2]
    out = _monitor_run(_run_dir(tmp_path / "i"), GpuRequest(runtime="slurm"), 0.05)
    assert out["available"] is False and "slurm" in out["reason"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    out = _monitor_run(_run_dir(tmp_path / "e"), GpuRequest(), 0.1)  # all GPUs, but the run uses one: said so
    assert out["gpus"] == [0, 1, 2] and any("while the run uses 1" in n for n in out["notes"])


def test_ticks_in_one_millisecond_stay_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks are grouped by time: a sample at stop in the same millisecond as the tick before must not merge with it."""
    gpus = [FakeGpu(uuid=f"GPU-bbbb000{i}-0000", power_mw=100_000 * (i + 1)) for i in range(2)]
    monkeypatch.setitem(sys.modules, "pynvml", make_module(gpus))
    monkeypatch.setattr(telemetry.time, "monotonic", lambda: 5.0)  # every tick in the same instant
    run_dir = _run_dir(tmp_path)
    out = _monitor_run(run_dir, seconds=0.1)
    rows = telemetry.read_csv(run_dir / "telemetry.csv")
    times = [r["time_s"] for r in rows]
    assert len(set(times)) == out["samples"] == len(rows) // 2 >= 2
    assert out["power_w"] == {"mean": 300.0, "max": 300.0}  # 100 W + 200 W each tick, never 600 W


def test_sampler_survives_failing_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = make_module()

    def broken(handle: object) -> None:
        raise RuntimeError("GPU is lost")

    fake.nvmlDeviceGetUtilizationRates = broken
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    out = _monitor_run(_run_dir(tmp_path), seconds=0.1)
    assert out["available"] is True and out["util_pct"] == {"mean": None, "max": None}


def test_summary_energy_per_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", make_module([FakeGpu(power_mw=250_000)]))
    gpu = _monitor_run(_run_dir(tmp_path), seconds=0.2)
    base = {"schema_version": 1, "engine": "pytorch", "precision": "bf16", "path": "optimized", "batch_per_device": 32,
            "devices": 1, "status": "ok", "reason": None, "throughput": 100.0}
    with_gpu = {**base, "run_id": "a", "repeat": 1, "telemetry": {"gpu": gpu}}
    without = {**base, "run_id": "b", "repeat": 2, "telemetry": {"gpu": {"available": False, "reason": "nvidia-ml-py is not installed"}}}
    result = {"work": {"samples": 1000}, "measurements": {"setup_s": 1.0, "warmup_s": 1.0}}
    summary = summarize("s", "id", False, [(with_gpu, result), (without, result)])
    validate(summary, "summary")
    row_a, row_b = summary["runs"]
    assert row_a["energy_per_sample_j"] == pytest.approx(gpu["energy_j"] / 1000)
    assert row_a["telemetry"] == "ok"
    assert row_b["energy_per_sample_j"] is None and row_b["telemetry"] == "unavailable: nvidia-ml-py is not installed"
    assert summary["groups"][0]["energy_per_sample_j"]["n"] == 1
    assert summary["telemetry"]["runs_with_energy"] == 1 and summary["telemetry"]["available"] is True


def test_unavailable_telemetry_names_its_reason() -> None:
    assert telemetry.TelemetrySummary.unavailable("no NVIDIA driver").to_json() == {"available": False, "reason": "no NVIDIA driver"}
    with pytest.raises(ValueError, match="reason"):
        telemetry.TelemetrySummary(False, None)


def test_the_interval_variable_sets_the_sampling_and_zero_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_TELEMETRY_INTERVAL_S", "0")
    monitor = telemetry.GpuTelemetry()
    monitor.start(_run_dir(tmp_path), GpuRequest())
    assert monitor.stop().to_json() == {"available": False, "reason": "off (BENCH_TELEMETRY_INTERVAL_S=0)"}
    monkeypatch.setenv("BENCH_TELEMETRY_INTERVAL_S", "0.05")
    monitor = telemetry.GpuTelemetry()
    monitor.start(_run_dir(tmp_path / "b"), GpuRequest())
    monitor.stop()
    assert monitor.interval_s == 0.05
