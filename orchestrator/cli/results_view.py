"""Rich tables of an artifact's summary."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from orchestrator.cli.console import fmt_rate, fmt_seconds, out, status_text


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
        columns = ["engine", "precision", "path", "batch", "dev", "n", "median", "min", "max", "95% CI", "TFLOP/s", "% peak", "J/sample"]
        columns += ["p50/p99 ms"] if latency else []
        columns += ["90-epoch h"] if train_estimate else []
        for column in [*columns, "warnings"]:
            table.add_column(column)
        for g in groups:
            tp = g["throughput"]
            ci = tp.get("ci95")
            energy = (g.get("energy_per_sample_j") or {}).get("median")
            cells = [g["engine"], g["precision"], g["path"], str(g["batch_per_device"]), str(g["devices"]), str(g["n"]),
                     fmt_rate(tp["median"]), fmt_rate(tp["min"]), fmt_rate(tp["max"]),
                     f"{fmt_rate(ci[0])} - {fmt_rate(ci[1])}" if ci else "-",
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
        table = Table(title="cross-engine throughput ratios (valid runs only)")
        for column in ("precision", "path", "batch", "dev", "engine", "vs", "ratio", "95% CI"):
            table.add_column(column)
        for r in summary["ratios"]:
            ci = r.get("ci95")
            table.add_row(r["precision"], r.get("path", ""), str(r.get("batch_per_device", "")), str(r.get("devices", "")),
                          r["engine"], r["baseline_engine"], f"{r['ratio']:.2f}x", f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "-")
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
