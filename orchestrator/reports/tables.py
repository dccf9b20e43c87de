"""The report's tables, in the one table model every output shares (reports/model.py: Column, Table)."""

from __future__ import annotations

from typing import Any

from orchestrator.judge.stats import SampleSummary
from orchestrator.judge.summary_model import ApparentGroup, Summary
from orchestrator.judge.trajectory import Verdict
from orchestrator.reports.claims import claims_table, lost_work_table
from orchestrator.reports.data import ReportData
from orchestrator.reports.environment import environment
from orchestrator.reports.formats import (
    APPARENT,
    DASH,
    ENERGY,
    PERCENT,
    PVALUE,
    RATE,
    RELATIVE,
    SECONDS,
    TIMES,
    Apparent,
    Span,
    blank,
    joined,
    number,
    of_total,
    span,
    with_reason,
)
from orchestrator.reports.model import Column, Table, columns

__all__ = ["Column", "Table", "columns"]  # the table model, re-exported for the exporters


def _stat(stats: SampleSummary | None, key: str) -> float | None:
    return getattr(stats, key) if stats else None


def overview(data: ReportData) -> Table:
    s, m = data.summary, data.manifest
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(s.counts.items())) or "no runs"
    integrity = "valid (schemas and sha256 of every file)" if not data.problems else \
        f"{len(data.problems)} problem(s): " + "; ".join(str(p) for p in data.problems[:3])
    cells = [
        ["scenario", s.scenario],
        ["artifact", s.artifact_id],
        ["source", data.source],
        ["created", m.get("created_at", DASH)],
        ["complete", "yes" if m.get("complete") else "no (interrupted or in progress)"],
        ["smoke run", "yes (throughput not representative)" if s.smoke else "no"],
        ["runs", counts],
        ["integrity", integrity],
        ["bench", m.get("bench_version", DASH)],
    ]
    return Table("overview", "Overview", columns("field", "value"), cells)


def runs(data: ReportData) -> Table:
    cols = [*columns("run", "engine", "precision", "path", "batch", "devices", "repeat"), Column("status", status=True),
            Column("samples/s", RATE), Column("apparent samples/s", APPARENT), Column("weights moved", RELATIVE),
            Column("setup s", SECONDS), Column("warmup s", SECONDS), Column("wall s", SECONDS),
            Column("J/img", ENERGY), Column("reason", blank)]
    by_id = {r.run_id: r for r in data.runs}
    cells = []
    for row in data.summary.runs:
        wall = by_id[row.run_id].record.wall_s if row.run_id in by_id else None
        cells.append([row.run_id, row.engine, row.precision, row.path, row.batch_per_device, row.devices,
                      row.repeat, row.status, row.throughput, Apparent.of(row.apparent_throughput, row.work_shortfall), row.weight_change,
                      row.setup_s, row.warmup_s, wall, row.energy_per_sample_j, row.reason])
    return Table("runs", "Runs", cols, cells, ["samples/s: steady-state throughput (warmup and setup excluded).",
                                               APPARENT_NOTE, WEIGHTS_NOTE])


APPARENT_NOTE = ("apparent samples/s: an invalid run's throughput as its engine counted it, with the work parity found "
                 "missing (read back from the framework); not a measurement of the scenario's work, never ranked.")
WEIGHTS_NOTE = ("weights moved: ||w_end - w_0|| / ||w_0|| of the trainable parameters, read back from the engine after the last "
                "step: a run that computes fewer updates than it counts moves its weights less far.")


def groups(data: ReportData) -> Table:
    cols = [*columns("engine", "precision", "path", "batch", "devices"), Column("n", of_total), Column("median", RATE),
            Column("min", RATE), Column("max", RATE), Column("IQR", RATE), Column("interval", span()),
            Column("J/img (median)", ENERGY), Column("apparent (invalid runs)", APPARENT), Column("warnings", joined("; "))]
    cells = []
    for g in data.summary.groups:
        tp = g.throughput
        cells.append([g.engine, g.precision, g.path, g.batch_per_device, g.devices, (g.n, g.n_total if g.n_total is not None else g.n),
                      _stat(tp, "median"), _stat(tp, "min"), _stat(tp, "max"), _stat(tp, "iqr"), Span.labelled(tp),
                      _stat(g.energy_per_sample_j, "median"), _apparent_cell(g.apparent), list(g.warnings)])
    notes = ["Steady-state throughput (samples/s) over the valid repeats; n = valid/total runs. "
             "interval: bootstrap (percentile) 95% CI of the median with 5+ repeats; with fewer, the range (min-max) of the repeats."]
    return Table("groups", "Throughput statistics per group", cols, cells, notes)


def _apparent_cell(block: ApparentGroup | None) -> Apparent | None:
    """A group's invalid runs: the median of their counted throughput and the distinct reasons."""
    if not block or not block.throughput:
        return None
    return Apparent(block.throughput.median, f"{block.n} run(s), " + "; ".join(block.reasons))


def ratio_cells(summary: Summary) -> list[list[Any]]:
    """One row per cross-engine ratio: precision, path, batch, devices, engine, vs, ratio, interval, p, significant."""
    cells = []
    for r in summary.ratios:
        sig = r.significant
        spread = Span.of(r.ci95, "ci95") if r.ci95 else Span.of(r.range, "range")
        cells.append([r.precision, r.path, r.batch_per_device, r.devices, r.engine, r.baseline_engine,
                      r.ratio, spread, r.p_value, "n/a" if sig is None else ("yes" if sig else "no*" if r.note else "no")])
    return cells


def ratios(data: ReportData) -> Table:
    cols = [*columns("precision", "path", "batch", "devices", "engine", "vs"), Column("ratio", TIMES),
            Column("interval", span(",.2f", "x")), Column("Mann-Whitney p", PVALUE), Column("significant")]
    notes_seen: list[str] = []
    for r in data.summary.ratios:
        if r.note and r.note not in notes_seen:
            notes_seen.append(r.note)
    cells = ratio_cells(data.summary)
    notes = [f"ratio = median throughput of 'engine' / median of 'vs', the reference engine {data.summary.reference_engine or ''} "
             "(valid runs only): 1.90x means engine reaches 1.90 times vs. One ratio per pair. "
             "interval: bootstrap 95% CI with 5+ repeats a side, else the range min(engine)/max(vs) - max(engine)/min(vs); "
             "significant: two-sided Mann-Whitney U p < 0.05 over the repeats."]
    notes += [f"* {note}" for note in notes_seen]
    if not cells:
        notes.append("No cross-engine ratio: fewer than two engines with valid runs in the same cell.")
    return Table("ratios", "Cross-engine ratios", cols, cells, notes)


def scaling_cells(summary: Summary) -> list[list[Any]]:
    """One row per strong-scaling figure: engine, precision, path, batch/device, devices, global batch, n, samples/s,
    speedup, its 95% CI, efficiency, note."""
    return [[r.engine, r.precision, r.path, r.batch_per_device, r.devices, r.batch_global, r.n,
             r.throughput, r.speedup, Span.of(r.speedup_ci95), r.efficiency, r.note]
            for r in summary.scaling or ()]


def scaling(data: ReportData) -> Table:
    cols = [*columns("engine", "precision", "path", "batch/device", "devices", "global batch", "n"), Column("samples/s (median)", RATE),
            Column("speedup", TIMES), Column("95% CI", span(",.2f", "x")), Column("efficiency", PERCENT), Column("note", blank)]
    cells = scaling_cells(data.summary)
    notes = ["speedup = median steady-state throughput on N devices / median on 1 device of the same engine, precision, path and "
             "per-device batch (data parallel: the global batch is per-device batch x N); efficiency = speedup / N. "
             "Multi-device throughput counts every device's samples over the slowest device's time. "
             "95% CI: bootstrap interval of the ratio of medians (5+ repeats a side)."]
    if not cells:
        notes.append("No strong-scaling figure: no run used more than one device.")
    return Table("scaling", "Strong scaling", cols, cells, notes)


def setup(data: ReportData) -> Table:
    latency = number(",.2f")
    cols = [*columns("engine", "precision", "path", "batch", "devices"), Column("setup s", SECONDS), Column("warmup s", SECONDS),
            *columns("warmup steps", "steady steps"), Column("steady s", SECONDS), Column("latency mean ms", latency),
            *(Column(k, latency) for k in ("p50", "p90", "p95", "p99"))]
    cells = []
    for g in data.summary.groups:
        measured = [r.result.measurements for r in data.runs if r.result and r.result.measurements and r.record.status == "ok"
                    and r.record.group == g.key]
        m = measured[0] if measured else None
        lat = g.latency_ms or {}
        steady = [mm.steady["time_s"] for mm in measured]
        cells.append([g.engine, g.precision, g.path, g.batch_per_device, g.devices,
                      _stat(g.setup_s, "median"), _stat(g.warmup_s, "median"),
                      m.warmup_steps if m else None, m.steady.get("steps") if m else None,
                      sorted(steady)[len(steady) // 2] if steady else None,
                      *(lat.get(k) for k in ("mean", "p50", "p90", "p95", "p99"))])
    notes = ["Medians over the valid repeats. setup: engine start to first step (imports, model, data); "
             "warmup: the warmup steps, compilation and graph capture included; both are excluded from throughput."]
    return Table("setup", "Setup, warmup and latency", cols, cells, notes)


def telemetry(data: ReportData) -> Table:
    cols = [*columns("run", "telemetry", "samples", "GPUs"), Column("mean W", RATE), Column("max W", RATE), Column("mean util %", RATE),
            Column("max mem GiB", number(",.2f")), *columns("max temp C", "throttling"), Column("energy J", RATE),
            Column("J/img", ENERGY), Column("method")]
    cells = []
    samples_by_run = {row.run_id: row.samples for row in data.summary.runs}
    for run in data.runs:
        gpu = run.gpu
        if not gpu or not gpu.get("available"):
            cells.append([run.run_id, "not recorded" if not gpu else f"unavailable: {gpu.get('reason')}", *[None] * 11])
            continue
        processed = samples_by_run.get(run.run_id)
        joules = gpu.get("energy_j")
        mem = gpu.get("mem_used_max_bytes")
        cells.append([run.run_id, "ok", gpu.get("samples"), ",".join(map(str, gpu.get("gpus", []))),
                      (gpu.get("power_w") or {}).get("mean"), (gpu.get("power_w") or {}).get("max"), (gpu.get("util_pct") or {}).get("mean"),
                      mem / 2**30 if mem is not None else None, gpu.get("temperature_max_c"),
                      ", ".join(gpu.get("throttle_reasons_seen") or []) or "none",
                      joules, joules / processed if joules is not None and processed else None, gpu.get("energy_method") or None])
    overview = data.summary.telemetry
    notes = [overview.energy_definition if overview else "J/img: GPU energy of the whole engine process / samples processed."]
    notes += [f"telemetry: {reason}" for reason in (overview.reasons if overview else ())]
    return Table("telemetry", "GPU telemetry and energy", cols, cells, notes)


def _parity_where(verdict: Verdict) -> str | None:
    """Where the deviation of a verdict of either kind is largest ('step 3', 'block 0')."""
    if verdict.at is None:
        return None
    return f"block {verdict.at}" if verdict.kind == "block_means" else f"step {verdict.at}"


PARITY_KINDS = {"steps": "first steps", "block_means": "block means"}


def parity_cells(summary: Summary) -> list[list[Any]]:
    """One row per numerical-parity verdict: precision, engines, kind, compared, largest deviation, where, tolerance, (verdict, reason)."""
    return [[v.precision, list(v.engines), PARITY_KINDS.get(v.kind, v.kind), v.compared, v.max_rel_dev, _parity_where(v),
             v.tolerance or None, (v.verdict, v.reason)] for v in summary.numerical_parity or ()]


def numerical_parity(data: ReportData) -> Table:
    cols = [Column("precision"), Column("engines", joined(" vs ")), Column("compared"), Column("n"),
            Column("largest relative deviation", number(".2e")), Column("at", blank), Column("tolerance there", number(".1e")),
            Column("verdict", with_reason(": {}"))]
    cells = parity_cells(data.summary)
    notes = ["Engine pairs that started from the same shared weights. first steps: the training losses of the first steps "
             "(up to 20), step by step, where both runs record every step; tolerance grows with the step. block means: the mean "
             "training loss of every harness block (warmup block 0, then each timing window) over the whole run, OpenNN included; "
             "constant tolerance per precision, provisional until measured on a GPU (orchestrator/judge/trajectory.py). "
             "parity_warning: runs kept, flagged."]
    if not cells:
        notes.append("No pair of training runs with recorded losses in the same cell.")
    return Table("numerical_parity", "Numerical parity", cols, cells, notes)


def parity(data: ReportData) -> Table:
    cells = []
    for run in data.runs:
        for m in run.record.parity.mismatches:
            cells.append([run.run_id, m.field, str(m.expected), str(m.actual), m.against])
    notes = [] if cells else ["Every checked run matched its spec and the other engines."]
    return Table("parity", "Parity findings", columns("run", "field", "expected", "actual", "against"), cells, notes)


def claims(data: ReportData) -> Table | None:
    """The scenario's claims: claimed, as published (``data.as_published``) and fair (reports/claims.py), or None."""
    return claims_table(data, data.as_published)


def all_tables(data: ReportData) -> list[Table]:
    optional = [table for table in (claims(data), lost_work_table(data, data.as_published)) if table is not None]
    return [overview(data), runs(data), groups(data), ratios(data), *optional, scaling(data), setup(data),
            telemetry(data), parity(data), numerical_parity(data), *environment(data)]
