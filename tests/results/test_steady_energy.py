"""Energy over the steady window: the engine's timing phase, heard from its phase lines, bounds the energy that
the J/sample figure divides by the timed samples (setup, compilation and warmup left out)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from orchestrator.host import telemetry
from orchestrator.host.gpu_samples import Sample, span_energy, steady_energy, summarize_samples
from orchestrator.host.gpus import DriverFacts, GpuRequest
from orchestrator.host.phase_lines import TimingPhases
from orchestrator.run.attempt import LineListener, _tapped
from orchestrator.schemas import validate
from tests.results.fake_nvml import FakeGpu, make_module
from tests.typed_docs import summarize_docs as summarize


class Ticks:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_timing_phases_are_the_single_process_or_rank_0_lines() -> None:
    clock = Ticks()
    phases = TimingPhases(clock)
    for at, line in [(1.0, "[bench-engine] phase warmup 0/5"), (2.0, "[bench-engine] phase timing 0/20"),
                     (3.0, "[bench-engine] phase timing 20/20"), (4.0, "loss 2.3 [bench-engine] phase done"),
                     (5.0, "[rank 1] [bench-engine] phase done"), (6.0, "[bench-engine] phase done")]:
        clock.now = at
        phases.line(line)
    assert phases.spans(end=99.0) == ((2.0, 6.0),)  # neither another line nor rank 1 ends the phase
    clock.now = 7.0
    phases.line("[rank 0] [bench-engine] phase timing 0/4")
    assert phases.spans(end=8.5) == ((2.0, 6.0), (7.0, 8.5))  # an engine stopped inside its timing phase: up to the stop


def _samples(points: list[tuple[float, float | None, int | None]], gpu: int = 0) -> list[Sample]:
    return [Sample(time_s=t, gpu=gpu, power_w=p, energy_mj=e) for t, p, e in points]


def test_span_energy_interpolates_the_counter_and_else_integrates_power() -> None:
    counter = _samples([(0.0, 100.0, 0), (1.0, 100.0, 100_000), (2.0, 300.0, 400_000), (3.0, 300.0, 700_000)])
    assert span_energy(counter, (0.5, 2.5)) == pytest.approx((550_000 - 50_000) / 1000)
    assert span_energy(counter, (2.5, 3.5)) is None and span_energy(counter, (-0.1, 1.0)) is None  # not covered
    reset = _samples([(0.0, 100.0, 900), (1.0, 100.0, 100), (2.0, 100.0, 200)])  # a counter that went back: power instead
    assert span_energy(reset, (0.5, 1.5)) == pytest.approx(100.0)
    power = _samples([(0.0, 100.0, None), (1.0, 300.0, None), (2.0, 300.0, None)])
    assert span_energy(power, (0.5, 2.0)) == pytest.approx(0.5 * (200 + 300) / 2 + 300)
    assert span_energy(_samples([(0.0, None, None)]), (0.0, 0.0)) is None


def test_steady_energy_sums_gpus_and_spans_and_says_when_it_cannot() -> None:
    rows = _samples([(0.0, 100.0, 0), (10.0, 100.0, 1_000_000)]) + _samples([(0.0, 50.0, 0), (10.0, 50.0, 500_000)], gpu=1)
    assert steady_energy(rows, [0, 1], [(1.0, 2.0), (3.0, 5.0)]) == (3.0, pytest.approx(3 * 150.0))
    assert steady_energy(rows, [0, 1], []) == (None, None)
    assert steady_energy(rows, [0, 1], [(1.0, 11.0)]) == (10.0, None)
    summary = summarize_samples(rows, 10.0, {}, {}, telemetry.GpuFactsBlock(DriverFacts(None, None), ()), [], 0.15, spans=[(1.0, 11.0)])
    assert summary.steady_energy_j is None and summary.steady_window_s == 10.0
    assert "no steady-window energy: the samples do not cover the timing phase" in summary.notes


def _run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps({"device": "auto", "parity": {"devices": 1}}))
    return run_dir


def test_the_monitor_hears_the_lines_and_measures_the_timing_phase_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(power_mw=100_000)
    monkeypatch.setitem(sys.modules, "pynvml", make_module([gpu]))
    monitor = telemetry.GpuTelemetry(interval_s=0.02)
    assert isinstance(monitor, LineListener)
    heard: list[str] = []
    sink = _tapped(heard.append, [monitor])
    monitor.start(_run_dir(tmp_path), GpuRequest())
    sink("[bench-engine] phase warmup 0/3")
    time.sleep(0.3)  # "warmup" at 100 W
    gpu.power_mw = 400_000
    sink("[bench-engine] phase timing 0/10")
    time.sleep(0.3)  # the timed steps at 400 W
    sink("[bench-engine] phase done")
    gpu.power_mw = 100_000
    time.sleep(0.2)
    out = monitor.stop().to_json()
    assert heard[0] == "[bench-engine] phase warmup 0/3"  # the reporter hears every line first
    assert out["steady_window_s"] == pytest.approx(0.3, abs=0.05)
    assert out["steady_energy_j"] == pytest.approx(400 * out["steady_window_s"], rel=0.15)
    assert out["energy_j"] > out["steady_energy_j"] * 1.3  # the process's energy holds the warmup and the tail
    validate({"schema_version": 1, "run_id": "r1", "engine": "e", "precision": "bf16", "path": "optimized", "batch_per_device": 1,
              "devices": 1, "repeat": 1, "status": "ok", "runtime": {"name": "local"}, "started_at": "t", "finished_at": "t",
              "wall_s": 1.0, "parity": {"checked": True, "ok": True, "mismatches": []}, "telemetry": {"gpu": out}}, "run-record")
    plain = heard.append
    assert _tapped(plain, []) is plain  # nothing listens: the sink itself


def _gpu_block(energy: float, steady: float | None, window: float | None) -> dict:
    return {"available": True, "reason": None, "energy_j": energy, "steady_energy_j": steady, "steady_window_s": window,
            "power_w": {"mean": 150.0, "max": 400.0}, "util_pct": {"mean": 60.0, "max": 99.0}, "notes": []}


def _summary(blocks: list[dict], timed_s: float = 10.0) -> dict:
    base = {"schema_version": 1, "engine": "pytorch", "precision": "bf16", "path": "optimized", "batch_per_device": 32,
            "devices": 1, "status": "ok", "reason": None, "throughput": 100.0}
    result = {"work": {"samples": 1200}, "measurements": {"setup_s": 1.0, "warmup_s": 1.0,
                                                          "steady": {"steps": 30, "samples": 1000, "time_s": timed_s, "throughput": 100.0}}}
    runs = [({**base, "run_id": f"r{i}", "repeat": i + 1, "telemetry": {"gpu": block}}, result) for i, block in enumerate(blocks)]
    summary = summarize("s", "id", False, runs)
    validate(summary, "summary")
    return summary


def test_the_summary_divides_the_steady_energy_by_the_timed_samples() -> None:
    summary = _summary([_gpu_block(9000.0, 4000.0, 10.05), _gpu_block(9000.0, 4200.0, 10.1)])
    first = summary["runs"][0]
    assert first["energy_scope"] == "steady" and first["energy_per_sample_j"] == pytest.approx(4.0)
    assert first["power_w_mean"] == pytest.approx(4000.0 / 10.05)  # the window's mean power, not the process's
    assert summary["groups"][0]["energy_per_sample_j"]["median"] == pytest.approx(4.1)
    assert summary["telemetry"]["energy_definition"].startswith("GPU energy over the engine's timing phase")


def test_a_window_shorter_than_the_timed_steps_is_not_trusted() -> None:
    # the phase lines did not bracket the engine's own 10 s of timed windows: whole-process energy instead
    row = _summary([_gpu_block(9000.0, 100.0, 5.0)])["runs"][0]
    assert row["energy_scope"] == "process" and row["energy_per_sample_j"] == pytest.approx(9000.0 / 1200)
    assert row["power_w_mean"] == 150.0
    assert _summary([_gpu_block(9000.0, 4000.0, 9.95)])["runs"][0]["energy_scope"] == "steady"  # within 1%
    assert _summary([_gpu_block(9000.0, 9500.0, 10.0)])["runs"][0]["energy_scope"] == "process"  # more than the whole


def test_a_group_never_mixes_steady_and_process_energy() -> None:
    summary = _summary([_gpu_block(9000.0, 4000.0, 10.0), _gpu_block(9000.0, None, None)])
    assert [r["energy_scope"] for r in summary["runs"]] == ["steady", "process"]
    assert summary["groups"][0]["energy_per_sample_j"]["n"] == 1
    assert summary["groups"][0]["energy_per_sample_j"]["median"] == pytest.approx(4.0)
    assert "runs recorded without that phase" in summary["telemetry"]["energy_definition"]
    old = _summary([_gpu_block(9000.0, None, None)])  # a record made before the steady window: as before
    assert old["telemetry"]["energy_definition"].startswith("GPU energy of the whole engine process")
