"""Helpers of the results tests: synthetic schema-valid artifacts (no engine is run) and an in-process CLI runner."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.core import cli_helpers

HERE = Path(__file__).parent
TEMPLATE = json.loads((HERE / "fixtures" / "result-template.json").read_text())


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """Run ``bench ARGS`` in-process through the console-script entry; (exit code, stdout, stderr)."""
    return cli_helpers.run_cli(capsys, monkeypatch, *map(str, args))


def _result(run_id: str, engine: str, precision: str, throughput: float, samples: int = 192) -> dict[str, Any]:
    result = copy.deepcopy(TEMPLATE)
    result["run_id"] = run_id
    result["engine"] = engine
    result["work"]["precision"]["name"] = precision
    result["work"]["samples"] = samples
    steady = result["measurements"]["steady"]
    steady["throughput"] = throughput
    steady["time_s"] = steady["samples"] / throughput
    per_window = steady["time_s"] / len(result["measurements"]["windows"])
    result["measurements"]["windows"] = [[1, 32, per_window * (1 + 0.05 * i)] for i in range(4)]
    return result


def _telemetry(run_dir: Path, power_w: float, seconds: float = 2.0, gpus: int = 1) -> dict[str, Any]:
    """A telemetry.csv and the run.json summary the monitor would have produced."""
    from orchestrator.host.telemetry import CSV_COLUMNS

    rows = []
    with open(run_dir / "telemetry.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        steps = int(seconds / 0.2)
        for i in range(steps + 1):
            for gpu in range(gpus):
                row = {"time_s": round(i * 0.2, 3), "gpu": gpu, "util_gpu_pct": 90 + i % 5, "util_mem_pct": 40, "mem_used_bytes": 3 * 2**30,
                       "power_w": power_w + i, "sm_clock_mhz": 1755, "mem_clock_mhz": 3201, "temperature_c": 50 + i // 3,
                       "throttle_reasons": 4, "throttle": "sw_power_cap", "energy_mj": 1000 * i}
                rows.append(row)
                writer.writerow([row[c] for c in CSV_COLUMNS])
    energy = power_w * seconds * gpus
    return {"available": True, "reason": None, "csv": "telemetry.csv", "interval_s": 0.2, "duration_s": seconds, "samples": steps + 1,
            "gpus": list(range(gpus)), "power_w": {"mean": power_w * gpus, "max": (power_w + steps) * gpus},
            "util_pct": {"mean": 92.0, "max": 94.0}, "mem_used_max_bytes": 3 * 2**30, "temperature_max_c": 53,
            "sm_clock_mean_mhz": 1755.0, "throttle_reasons_seen": ["sw_power_cap"], "energy_j": energy,
            "energy_method": "energy_counter", "driver": "570.86.15", "cuda_driver": "12.8",
            "devices": [{"index": g, "name": "NVIDIA H200", "uuid": f"GPU-{g:08d}", "memory_total_bytes": 141 * 2**30,
                         "power_limit_w": 700.0, "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 3201, "persistence_mode": 1,
                         "mig_mode": 0, "ecc_mode": 1, "compute_capability": "9.0"} for g in range(gpus)],
            "per_gpu": [], "notes": []}


def build_artifact(root: Path, throughputs: dict[tuple[str, str], list[float | None]], scenario: str = "synthetic",
                   artifact_id: str = "20260101T000000Z-aaaaaa", telemetry_power: float | None = None, smoke: bool = False,
                   environment: dict[str, Any] | None = None, host: dict[str, Any] | None = None,
                   runtimes: dict[str, dict[str, Any]] | None = None, optimizations: dict[str, Any] | None = None) -> Path:
    """An artifact folder with one run per value; ``None`` makes a failed run. Returns its folder.
    ``environment`` updates every result's environment, ``optimizations`` its ``work.optimizations``;
    ``host`` is every run record's host block;
    ``runtimes``: run id or engine -> the run record's runtime block (default: local)."""
    from orchestrator.artifacts import Artifact, write_manifest
    from orchestrator.jsonio import write_json
    from tests.typed_docs import summarize_docs as summarize

    folder = root / scenario / artifact_id
    artifact = Artifact(folder, scenario, artifact_id)
    runs = []
    for (engine, precision), values in throughputs.items():
        for repeat, value in enumerate(values, 1):
            run_id = f"{engine}-{precision}-optimized-b32-d1-r{repeat}"
            run_dir = artifact.run_dir(run_id)
            run_dir.mkdir(parents=True)
            ok = value is not None
            record = {"schema_version": 1, "run_id": run_id, "engine": engine, "precision": precision, "path": "optimized",
                      "batch_per_device": 32, "devices": 1, "repeat": repeat, "status": "ok" if ok else "failed",
                      "reason": None if ok else "crash: synthetic failure", "exit_code": 0 if ok else 1,
                      "runtime": (runtimes or {}).get(run_id) or (runtimes or {}).get(engine) or {"name": "local", "interpreter": "/usr/bin/python3"},
                      "started_at": "2026-01-01T00:00:00.000Z",
                      "finished_at": "2026-01-01T00:00:10.000Z", "wall_s": 10.0,
                      "parity": {"checked": ok, "ok": ok, "mismatches": []}, "throughput": value}
            result = _result(run_id, engine, precision, value) if ok else None
            if result and environment:
                result["environment"].update(environment)
            if result and optimizations:
                result["work"]["optimizations"].update(optimizations)
            if host is not None:
                record["host"] = host
            if telemetry_power is not None:
                record["telemetry"] = {"gpu": _telemetry(run_dir, telemetry_power)}
            if result:
                write_json(run_dir / "result.json", result, "engine-result")
            (run_dir / "engine.log").write_text(f"{run_id}\n")
            write_json(run_dir / "run.json", record, "run-record")
            runs.append((record, result))
    host = {"hostname": "synthetic", "cpu_count": 2, "python": "3.11", "bench_version": "0.1.0",
            "nvml": {"available": False, "reason": "synthetic", "gpus": []}}
    write_json(folder / "summary.json", summarize(scenario, artifact_id, smoke, runs, host), "summary")
    write_manifest(artifact, complete=True)
    return folder
