"""Rich tables of an artifact's summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.table import Table

from orchestrator.cli.console import fmt_rate, fmt_seconds, out, status_text


def interval_text(stats: dict[str, Any], fmt: Callable[[float], str]) -> str:
    """'95% CI a - b' with 5+ repeats, else 'range min - max' (orchestrator.stats.interval_kind)."""
    interval = stats.get("interval")
    if not interval:
        return "-"
    label = "95% CI" if interval["kind"] == "ci95" else "range"
    return f"{label} {fmt(interval['low'])} - {fmt(interval['high'])}"


def _stat(summary: dict[str, Any] | None, key: str = "median") -> float | None:
    return summary.get(key) if summary else None


def render_summary(summary: dict[str, Any]) -> None:
    title = f"{summary['scenario']} {summary['artifact_id']}" + (" [smoke]" if summary.get("smoke") else "")
    runs = Table(title=title)
    for column in ("run", "engine", "precision", "path", "batch", "dev", "status", "samples/s", "setup s", "warmup s", "parity / reason"):
        runs.add_column(column, overflow="fold")
    for row in summary["runs"]:
        runs.add_row(row["run_id"], row["engine"], row["precision"], row.get("path", ""), str(row.get("batch_per_device", "")),
                     str(row.get("devices", "")), status_text(row["status"]), fmt_rate(row.get("throughput")),
                     fmt_seconds(row.get("setup_s")), fmt_seconds(row.get("warmup_s")),
                     "ok" if row["status"] == "ok" else (row.get("reason") or "")[:160])
    out.print(runs)
    groups = [g for g in summary["groups"] if g.get("throughput")]
    if groups:
        train_estimate = any(g.get("time_to_train_h") for g in groups)
        latency = any(g.get("latency_ms") for g in groups)
        table = Table(title="steady-state throughput (samples/s, median over valid repeats)")
        columns = ["engine", "precision", "path", "batch", "dev", "n", "median", "min", "max", "interval", "TFLOP/s", "% peak", "J/sample"]
        columns += ["p50/p99 ms"] if latency else []
        columns += ["90-epoch h"] if train_estimate else []
        for column in [*columns, "warnings"]:
            table.add_column(column)
        for g in groups:
            tp = g["throughput"]
            energy = (g.get("energy_per_sample_j") or {}).get("median")
            cells = [g["engine"], g["precision"], g["path"], str(g["batch_per_device"]), str(g["devices"]), str(g["n"]),
                     fmt_rate(tp["median"]), fmt_rate(tp["min"]), fmt_rate(tp["max"]),
                     interval_text(tp, fmt_rate),
                     f"{g['achieved_tflops']:.1f}" if g.get("achieved_tflops") else "-",
                     f"{100 * g['peak_fraction']:.1f}%" if g.get("peak_fraction") else "-",
                     f"{energy:.4f}" if energy else "-"]
            if latency:
                lat = g.get("latency_ms") or {}
                cells.append(f"{lat['p50']:.2f}/{lat['p99']:.2f}" if "p50" in lat and "p99" in lat else "-")
            if train_estimate:
                cells.append(f"{g['time_to_train_h']:.1f}" if g.get("time_to_train_h") else "-")
            table.add_row(*cells, "; ".join(g.get("warnings", [])))
        out.print(table)
    if summary.get("ratios"):
        table = Table(title=f"cross-engine throughput ratios against {summary.get('reference_engine') or 'the reference'} (valid runs only)")
        for column in ("precision", "path", "batch", "dev", "engine", "vs", "ratio", "interval"):
            table.add_column(column)
        for r in summary["ratios"]:
            ci, span = r.get("ci95"), r.get("range")
            text = f"95% CI {ci[0]:.2f}-{ci[1]:.2f}" if ci else (f"range {span[0]:.2f}-{span[1]:.2f}" if span else "-")
            table.add_row(r["precision"], r.get("path", ""), str(r.get("batch_per_device", "")), str(r.get("devices", "")),
                          r["engine"], r["baseline_engine"], f"{r['ratio']:.2f}x", text)
        out.print(table)
    verdicts = summary.get("numerical_parity") or []
    if verdicts:
        table = Table(title="numerical parity: first training losses per engine pair (shared initial weights)")
        for column in ("precision", "engines", "steps", "largest deviation", "at step", "tolerance there", "verdict"):
            table.add_column(column)
        for v in verdicts:
            dev = v.get("max_rel_dev")
            table.add_row(v["precision"], " vs ".join(v["engines"]), str(v.get("steps", 0)), f"{dev:.2e}" if dev is not None else "-",
                          str(v.get("at_step") or "-"), f"{v['tolerance']:.1e}" if v.get("tolerance") else "-",
                          v["verdict"] + (f" ({v['reason']})" if v.get("reason") else ""))
        out.print(table)
    scaling_rows = summary.get("scaling") or []
    if scaling_rows:
        table = Table(title="strong scaling (speedup = median samples/s on N devices / on 1 device; efficiency = speedup / N)")
        for column in ("engine", "precision", "path", "batch/dev", "dev", "global batch", "n", "samples/s", "speedup", "95% CI",
                       "efficiency", "note"):
            table.add_column(column)
        for r in scaling_rows:
            ci = r.get("speedup_ci95")
            table.add_row(r["engine"], r["precision"], r.get("path", ""), str(r["batch_per_device"]), str(r["devices"]),
                          str(r.get("batch_global", "")), str(r.get("n", "")), fmt_rate(r.get("throughput")),
                          f"{r['speedup']:.2f}x" if r.get("speedup") is not None else "-", f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "-",
                          f"{100 * r['efficiency']:.1f}%" if r.get("efficiency") is not None else "-", r.get("note") or "")
        out.print(table)
