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
    if any(g["n"] > 1 for g in groups):
        table = Table(title="steady-state throughput over repeats (samples/s)")
        for column in ("engine", "precision", "path", "batch", "dev", "n", "median", "min", "max", "IQR", "95% CI", "warnings"):
            table.add_column(column)
        for g in groups:
            tp = g["throughput"]
            ci = tp.get("ci95")
            table.add_row(g["engine"], g["precision"], g["path"], str(g["batch_per_device"]), str(g["devices"]), str(g["n"]),
                          fmt_rate(tp["median"]), fmt_rate(tp["min"]), fmt_rate(tp["max"]), fmt_rate(tp["iqr"]),
                          f"{fmt_rate(ci[0])} - {fmt_rate(ci[1])}" if ci else "-", "; ".join(g.get("warnings", [])))
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
