"""The machine-readable tables of an artifact: raw values under their field names, exported as runs.csv and groups.csv.

``pandas.read_csv('runs.csv')`` reads them as they are: one row per run, numeric columns as numbers.
"""

from __future__ import annotations

from typing import Any

from orchestrator.reports.data import ReportData
from orchestrator.reports.tables import Table, columns

RUN_FIELDS = ("run_id", "engine", "precision", "path", "batch_per_device", "devices", "repeat", "status", "reason",
              "throughput", "setup_s", "warmup_s", "steady_time_s", "steady_samples", "samples", "steps", "wall_s",
              "latency_mean_ms", "latency_p50_ms", "latency_p90_ms", "latency_p95_ms", "latency_p99_ms", "peak_memory_bytes",
              "energy_j", "energy_per_sample_j", "power_w_mean", "gpu_util_pct_mean", "telemetry", "framework",
              "framework_version", "device_kind", "runtime", "started_at", "finished_at")
GROUP_FIELDS = ("engine", "precision", "path", "batch_per_device", "devices", "n", "n_total", "median", "mean", "min", "max",
                "iqr", "q1", "q3", "stdev", "ci95_low", "ci95_high", "interval_kind", "interval_low", "interval_high",
                "energy_per_sample_j_median", "warnings")


def _fields(key: str, title: str, fields: tuple[str, ...], rows: list[dict[str, Any]]) -> Table:  # rows: a CSV's, by column
    """A machine-readable table: one column per field, named as it is, raw values."""
    return Table(key, title, columns(*fields), [[row.get(name) for name in fields] for row in rows])


def runs_data(data: ReportData) -> Table:
    """Every run with its raw measurements, one row per run (runs.csv)."""
    by_id = {r.run_id: r for r in data.runs}
    rows = []
    for row in data.summary.runs:
        run = by_id.get(row.run_id)
        record = run.record if run else None
        result = run.result if run else None
        m = result.measurements if result else None
        steady = m.steady if m else {}
        work = (result.work if result else None) or {}
        env = result.environment if result else {}
        latency = (m.latency_ms if m else None) or {}
        rows.append({
            **row.to_json(),
            "steady_time_s": steady.get("time_s"),
            "steady_samples": steady.get("samples"),
            "samples": row.samples if row.samples is not None else work.get("samples"),
            "steps": work.get("steps"),
            "wall_s": record.wall_s if record else None,
            **{f"latency_{k}_ms": latency.get(k) for k in ("mean", "p50", "p90", "p95", "p99")},
            "peak_memory_bytes": m.peak_memory_bytes if m else None,
            "framework": env.get("framework"),
            "framework_version": env.get("framework_version"),
            "device_kind": env.get("device_kind"),
            "runtime": record.runtime.get("name") if record else None,
            "started_at": record.started_at if record else None,
            "finished_at": record.finished_at if record else None,
        })
    return _fields("runs_data", "Runs (raw values)", RUN_FIELDS, rows)


def groups_data(data: ReportData) -> Table:
    """Every group's throughput statistics, raw, one row per group (groups.csv)."""
    rows = []
    for g in data.summary.groups:
        tp = g.throughput
        ci = (tp.ci95 if tp else None) or (None, None)
        interval = tp.interval if tp else None
        rows.append({**{k: getattr(g, k) for k in ("engine", "precision", "path", "batch_per_device", "devices", "n", "n_total")},
                     **{k: getattr(tp, k) if tp else None for k in ("median", "mean", "min", "max", "iqr", "q1", "q3", "stdev")},
                     "ci95_low": ci[0], "ci95_high": ci[1],
                     **{f"interval_{k}": getattr(interval, k) if interval else None for k in ("kind", "low", "high")},
                     "energy_per_sample_j_median": g.energy_per_sample_j.median if g.energy_per_sample_j else None,
                     "warnings": "; ".join(g.warnings)})
    return _fields("groups_data", "Throughput statistics per group (raw values)", GROUP_FIELDS, rows)
