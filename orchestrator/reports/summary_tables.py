"""The tables of a summary.json alone, as ``bench results show`` (and the end of a run) prints them.

Each comes compact by default (fits 80 columns: the run id split into engine, precision and repeat, what every
row shares moved into the title, reasons cut with an ellipsis, warnings and notes as footnotes) and whole with
``wide`` (``--wide``: every column, every reason in full). Shorter than the report's (reports/tables.py), whose
cells they share where they show the same thing (ratios, strong scaling, numerical parity).
"""

from __future__ import annotations

from orchestrator.judge.summary_model import GroupRow, Summary
from orchestrator.reports.claims import MeasuredRatio, measured_ratio
from orchestrator.reports.formats import (
    PERCENT,
    RATE,
    SECONDS,
    TIMES,
    Apparent,
    Span,
    blank,
    compact_rate,
    compact_rate_or_apparent,
    joined,
    number,
    of_total,
    rate_or_apparent,
    significant,
    span,
    span_of,
    with_reason,
)
from orchestrator.reports.model import Table
from orchestrator.reports.tables import parity_cells, ratio_cells, scaling_cells
from orchestrator.reports.views import Field, batch_label, devices_label, footnotes, group_label, interval_heading, view
from orchestrator.scenario.blocks import ClaimedRatio, Claims

TFLOPS = significant(3)
PEAK = significant(2, "%", 100)
JOULES = significant(3)
HOURS = significant(3)
APPARENT_NOTE = "(n): an invalid run's samples/s as its engine counted it, not a measurement (the reason says why)."


def _group_fields(batch_header: str = "batch") -> list[Field]:
    """engine, precision, path, batch, devices: the key of a group (the last three fold into the title when shared)."""
    return [Field("engine", lambda r: r.engine), Field("precision", lambda r: r.precision, short="prec"),
            Field("path", lambda r: r.path, blank, fold=str),
            Field(batch_header, lambda r: r.batch_per_device, blank, fold=batch_label),
            Field("dev", lambda r: r.devices, blank, fold=devices_label)]


def _title(summary: Summary) -> str:
    return f"{summary.scenario} {summary.artifact_id}" + (" [smoke]" if summary.smoke else "")


def runs(summary: Summary, wide: bool = False) -> Table:
    rows = list(summary.runs)
    verdict = (lambda cell: "ok" if cell[0] == "ok" else cell[1] or "", lambda cell: "" if cell[0] == "ok" else cell[1] or "")
    fields = [Field("run", lambda r: r.run_id, wide_only=True), *_group_fields(),
              Field("repeat", lambda r: r.repeat, blank, short="#"), Field("status", lambda r: r.status, status=True),
              Field("samples/s", lambda r: r.throughput or Apparent.of(r.apparent_throughput, r.work_shortfall),
                    rate_or_apparent, compact_rate_or_apparent),
              Field("setup s", lambda r: r.setup_s, SECONDS), Field("warmup s", lambda r: r.warmup_s, SECONDS)]
    if wide or any(r.status != "ok" for r in rows):
        fields.append(Field("parity / reason", lambda r: (r.status, r.reason), verdict[0], verdict[1], short="reason", clip=True))
    apparent = not wide and any(r.apparent_throughput and not r.throughput for r in rows)
    return view("runs", _title(summary), fields, rows, wide, [APPARENT_NOTE] if apparent else [])


def groups(summary: Summary, wide: bool = False) -> Table | None:
    """Groups with valid runs; the latency and time-to-train columns only when some group has them."""
    valid = [g for g in summary.groups if g.throughput]
    if not valid:
        return None
    spans = [Span.labelled(g.throughput) for g in valid]
    header, compact_span = interval_heading(spans, compact_rate)
    latency = any(g.latency_ms for g in valid)  # compact: in the place of % peak
    fields = [*_group_fields(), Field("n", lambda g: (g.n, g.n if g.n_total is None else g.n_total),
                                      lambda p: str(p[0]) if p[0] == p[1] else of_total(p)),
              Field("median", lambda g: g.throughput.median, RATE, compact_rate),
              Field("min", lambda g: g.throughput.min, RATE, wide_only=True),
              Field("max", lambda g: g.throughput.max, RATE, wide_only=True),
              Field("interval", lambda g: Span.labelled(g.throughput), span(), compact_span, short=header),
              Field("TFLOP/s", lambda g: g.achieved_tflops or None, TFLOPS),
              Field("% peak", lambda g: g.peak_fraction or None, PEAK, wide_only=latency),
              Field("J/sample", lambda g: (g.energy_per_sample_j.median if g.energy_per_sample_j else None) or None, JOULES)]
    if latency:
        fields.append(Field("p50/p99 ms", _latency, span(".2f", sep="/"), span_of(significant(3), "/")))
    if any(g.time_to_train_h for g in valid):
        fields.append(Field("90-epoch h", lambda g: g.time_to_train_h or None, HOURS, wide_only=True))
    fields.append(Field("warnings", lambda g: list(g.warnings) or None, joined("; "), wide_only=True))
    batches = len({g.batch_per_device for g in valid}) > 1  # a footnote names its batch, as the table's rows do
    notes = [] if wide else footnotes(((group_label(g, batches), w) for g in valid for w in g.warnings), "warning")
    title = "steady-state throughput (samples/s, median over valid repeats)" if wide else "samples/s over the valid repeats"
    return view("groups", title, fields, valid, wide, notes)


def _latency(group: GroupRow) -> Span | None:
    lat = group.latency_ms or {}
    return Span(lat["p50"], lat["p99"]) if "p50" in lat and "p99" in lat else None


def ratios(summary: Summary, wide: bool = False) -> Table | None:
    if not summary.ratios:
        return None
    cells = ratio_cells(summary)  # precision, path, batch, devices, engine, vs, ratio, interval, p, significant
    header, compact_span = interval_heading([c[7] for c in cells], number(".2f"))
    fields = [Field("precision", lambda c: c[0], short="prec"), Field("path", lambda c: c[1], blank, fold=str),
              Field("batch", lambda c: c[2], blank, fold=batch_label), Field("dev", lambda c: c[3], blank, fold=devices_label),
              Field("engine", lambda c: c[4]), Field("vs", lambda c: c[5]), Field("ratio", lambda c: c[6], TIMES),
              Field("interval", lambda c: c[7], span(".2f", sep="-"), compact_span, short=header),
              Field("p", lambda c: c[8], number(".3g", missing="n/a"), wide_only=True), Field("significant", lambda c: c[9], wide_only=True)]
    reference = summary.reference_engine or "the reference"
    title = (f"cross-engine throughput ratios against {reference} (valid runs only)" if wide
             else f"throughput ratios against {reference}")
    starred = dict.fromkeys(r.note for r in summary.ratios if r.note and r.significant is False)
    return view("ratios", title, fields, cells, wide, [f"no*: {note}" for note in starred] if wide else [])


def numerical_parity(summary: Summary, wide: bool = False) -> Table | None:
    cells = parity_cells(summary)  # precision, engines, kind, compared, deviation, at, tolerance, (verdict, reason)
    if not cells:
        return None
    fields = [Field("precision", lambda c: c[0], short="prec"), Field("engines", lambda c: c[1], joined(" vs ")),
              Field("compared", lambda c: c[2], wide_only=True), Field("n", lambda c: c[3], wide_only=True),
              Field("compared", lambda c: f"{c[3]} {c[2]}", compact_only=True),
              Field("largest deviation", lambda c: c[4], number(".2e"), short="max dev"),
              Field("at", lambda c: c[5], blank, wide_only=True),
              Field("tolerance there", lambda c: c[6], number(".1e"), short="tolerance"),
              Field("verdict", lambda c: c[7], with_reason(" ({})"), clip=True)]
    title = ("numerical parity: first-step and block-mean training losses per engine pair (shared initial weights)" if wide
             else "numerical parity of the training losses (shared initial weights)")
    return view("numerical_parity", title, fields, cells, wide)


def scaling(summary: Summary, wide: bool = False) -> Table | None:
    cells = scaling_cells(summary)  # engine, precision, path, batch/dev, dev, global batch, n, samples/s, speedup, CI, efficiency, note
    if not cells:
        return None
    cells = [[*c[:9], Span(c[9].low, c[9].high, "ci95") if c[9] else None, *c[10:]] for c in cells]  # a bootstrap 95% CI
    header, compact_span = interval_heading([c[9] for c in cells], number(".2f"))
    fields = [Field("engine", lambda c: c[0]), Field("precision", lambda c: c[1], short="prec"),
              Field("path", lambda c: c[2], blank, fold=str), Field("batch/dev", lambda c: c[3], fold=lambda t: f"batch {t}/device"),
              Field("dev", lambda c: c[4]), Field("global batch", lambda c: c[5], blank, short="global"), Field("n", lambda c: c[6], blank),
              Field("samples/s", lambda c: c[7], RATE, compact_rate), Field("speedup", lambda c: c[8], TIMES),
              Field("95% CI", lambda c: c[9], span_of(number(".2f")), compact_span, short=header),
              Field("efficiency", lambda c: c[10], PERCENT), Field("note", lambda c: c[11], blank, wide_only=True)]
    notes = [] if wide else footnotes(((f"{c[0]} {c[1]} x{c[4]}", c[11]) for c in cells), "note")
    title = ("strong scaling (speedup = median samples/s on N devices / on 1 device; efficiency = speedup / N)" if wide
             else "strong scaling (speedup against 1 device; efficiency = speedup / N)")
    return view("scaling", title, fields, cells, wide, notes)


def claims(summary: Summary, block: Claims | None, wide: bool = False) -> Table | None:
    """The scenario's claims (its YAML ``claims`` block) against this artifact's ratios (the report adds the as-published
    artifact), or None."""
    if block is None or not block.ratios:
        return None
    rows: list[tuple[ClaimedRatio, MeasuredRatio | None]] = [
        (claim, measured_ratio(summary, claim.engine, claim.vs, claim.precision, claim.path)) for claim in block.ratios]
    header, compact_span = interval_heading([m.interval for _, m in rows if m], number(".2f"))
    fields = [Field("engine / vs", lambda r: f"{r[0].engine} / {r[0].vs}"), Field("precision", lambda r: r[0].precision, short="prec"),
              Field("path", lambda r: r[0].path, fold=str), Field("claimed", lambda r: r[0].claimed, TIMES),
              Field("measured", lambda r: r[1].ratio if r[1] else None, TIMES),
              Field("interval", lambda r: r[1].interval if r[1] else None, span(",.2f", "x"), compact_span, short=header),
              Field("measured / claimed", lambda r: r[1].ratio / r[0].claimed if r[1] and r[1].valid else None, number(".2f"),
                    number(".0%"), short="of claim"),
              Field("validity", lambda r: r[1].label if r[1] else None, clip=True),
              Field("as stated", lambda r: r[0].as_stated, blank, wide_only=True)]
    notes = [f"claimed on {block.hardware or 'other hardware'}; measured: this artifact"
             + (f". Source: {block.source}" if wide and block.source else "")]
    return view("claims", "claimed vs measured ratios", fields, rows, wide, notes)


def summary_tables(summary: Summary, wide: bool = False, claims_block: Claims | None = None) -> list[Table]:
    """Runs, then whichever of statistics, ratios, claims, numerical parity and strong scaling the summary has."""
    found = [groups(summary, wide), ratios(summary, wide), claims(summary, claims_block, wide), numerical_parity(summary, wide),
             scaling(summary, wide)]
    return [runs(summary, wide), *(table for table in found if table is not None)]
