"""The tables of a summary.json alone, as ``bench results show`` (and the end of a run) prints them.

Shorter than the report's (reports/tables.py), whose cells they share where they show the same thing
(ratios, strong scaling, numerical parity).
"""

from __future__ import annotations

from typing import Any

from orchestrator.reports.formats import (
    PERCENT,
    RATE,
    SECONDS,
    TIMES,
    Apparent,
    Span,
    blank,
    joined,
    number,
    rate_or_apparent,
    span,
    with_reason,
)
from orchestrator.reports.tables import Column, Table, columns, parity_cells, ratio_cells, scaling_cells


def runs(summary: dict[str, Any]) -> Table:
    title = f"{summary['scenario']} {summary['artifact_id']}" + (" [smoke]" if summary.get("smoke") else "")
    cols = [*columns("run", "engine", "precision"), Column("path", blank), Column("batch", blank), Column("dev", blank),
            Column("status", status=True), Column("samples/s", rate_or_apparent), Column("setup s", SECONDS), Column("warmup s", SECONDS),
            Column("parity / reason")]
    cells = [[row["run_id"], row["engine"], row["precision"], row.get("path"), row.get("batch_per_device"), row.get("devices"), row["status"],
              row.get("throughput") or Apparent.of(row.get("apparent_throughput"), row.get("work_shortfall")), row.get("setup_s"), row.get("warmup_s"),
              "ok" if row["status"] == "ok" else (row.get("reason") or "")[:160]] for row in summary["runs"]]
    return Table("runs", title, cols, cells)


def groups(summary: dict[str, Any]) -> Table | None:
    """Groups with valid runs; the latency and time-to-train columns only when some group has them."""
    valid = [g for g in summary["groups"] if g.get("throughput")]
    if not valid:
        return None
    latency = any(g.get("latency_ms") for g in valid)
    train_estimate = any(g.get("time_to_train_h") for g in valid)
    cols = [*columns("engine", "precision", "path", "batch", "dev", "n"), Column("median", RATE), Column("min", RATE), Column("max", RATE),
            Column("interval", span()), Column("TFLOP/s", number(".1f")), Column("% peak", PERCENT), Column("J/sample", number(".4f")),
            *([Column("p50/p99 ms", span(".2f", sep="/"))] if latency else []), *([Column("90-epoch h", number(".1f"))] if train_estimate else []),
            Column("warnings", joined("; "))]
    cells = []
    for g in valid:
        tp = g["throughput"]
        lat = g.get("latency_ms") or {}
        row = [g["engine"], g["precision"], g["path"], g["batch_per_device"], g["devices"], g["n"], tp["median"], tp["min"], tp["max"],
               Span.labelled(tp), g.get("achieved_tflops") or None, g.get("peak_fraction") or None,
               (g.get("energy_per_sample_j") or {}).get("median") or None]
        row += [Span(lat["p50"], lat["p99"]) if "p50" in lat and "p99" in lat else None] if latency else []
        row += [g.get("time_to_train_h") or None] if train_estimate else []
        cells.append([*row, g.get("warnings")])
    return Table("groups", "steady-state throughput (samples/s, median over valid repeats)", cols, cells)


def ratios(summary: dict[str, Any]) -> Table | None:
    if not summary.get("ratios"):
        return None
    cols = [*columns("precision"), Column("path", blank), Column("batch", blank), Column("dev", blank), *columns("engine", "vs"),
            Column("ratio", TIMES), Column("interval", span(".2f", sep="-"))]
    title = f"cross-engine throughput ratios against {summary.get('reference_engine') or 'the reference'} (valid runs only)"
    return Table("ratios", title, cols, [row[:len(cols)] for row in ratio_cells(summary)])


def numerical_parity(summary: dict[str, Any]) -> Table | None:
    cells = parity_cells(summary)
    if not cells:
        return None
    cols = [Column("precision"), Column("engines", joined(" vs ")), Column("compared"), Column("n"),
            Column("largest deviation", number(".2e")), Column("at", blank), Column("tolerance there", number(".1e")),
            Column("verdict", with_reason(" ({})"))]
    title = "numerical parity: first-step and block-mean training losses per engine pair (shared initial weights)"
    return Table("numerical_parity", title, cols, cells)


def scaling(summary: dict[str, Any]) -> Table | None:
    cells = scaling_cells(summary)
    if not cells:
        return None
    cols = [*columns("engine", "precision"), Column("path", blank), *columns("batch/dev", "dev"), Column("global batch", blank),
            Column("n", blank), Column("samples/s", RATE), Column("speedup", TIMES), Column("95% CI", span(".2f", sep="-")),
            Column("efficiency", PERCENT), Column("note", blank)]
    return Table("scaling", "strong scaling (speedup = median samples/s on N devices / on 1 device; efficiency = speedup / N)", cols, cells)


def summary_tables(summary: dict[str, Any]) -> list[Table]:
    """Runs, then whichever of statistics, ratios, numerical parity and strong scaling the summary has."""
    found = [groups(summary), ratios(summary), numerical_parity(summary), scaling(summary)]
    return [runs(summary), *(table for table in found if table is not None)]
