"""Claimed vs measured, three ways: a published ratio, the same ratio under the publication's own protocol on
this GPU, and under bench's fair paths.

The scenario's ``claims`` block lists published ratios (engine / vs, precision, path, claimed). For each, the
report shows the claim, the ratio measured in a second artifact that ran the publication's protocol (each engine
configured as the publication configured it: ``--as-published``), and the ratio measured in this artifact
(every engine's fastest correct path). A side whose runs are all invalid (parity found it did not do the work it
counted) gives an *apparent* ratio from its counted throughput, labelled invalid with the shortfall: visible,
never a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.judge.stats import SampleSummary
from orchestrator.judge.summary_model import GroupRow, Summary
from orchestrator.reports.data import ReportData
from orchestrator.reports.formats import DASH, TIMES, Span, number, span, text
from orchestrator.reports.model import Column, Table, columns


@dataclass(frozen=True)
class MeasuredRatio:
    """engine / vs in one artifact: the ratio, its interval, and whether both sides were valid."""

    ratio: float
    interval: Span | None
    valid: bool
    why: str | None = None  # the invalid side's shortfall

    @property
    def label(self) -> str:
        """'valid' or 'apparent, invalid: opennn 381 of 780 updates'."""
        return "valid" if self.valid else f"apparent, invalid: {self.why}"


def _group(summary: Summary, engine: str, precision: str, path: str) -> GroupRow | None:
    """The one-device group of ``engine`` in that cell (the claims compare single-GPU runs)."""
    return summary.group(engine, precision, path, devices=1)


def _side(group: GroupRow | None) -> tuple[SampleSummary | None, str | None]:
    """(throughput statistics, None) for a valid group, (apparent statistics, why) for an all-invalid one."""
    if group is None:
        return None, None
    if group.n and group.throughput:
        return group.throughput, None
    if group.apparent is not None and group.apparent.throughput:
        return group.apparent.throughput, f"{group.engine} " + "; ".join(group.apparent.reasons or ["invalid"])
    return None, None


def _summary_ci(summary: Summary, engine: str, vs: str, precision: str, path: str) -> Span | None:
    """The bootstrap CI of the summary's ratio for the pair, inverted when the summary took it the other way round."""
    for r in summary.ratios:
        if (r.precision, r.path, 1 if r.devices is None else r.devices) != (precision, path, 1) or not r.ci95:
            continue
        if (r.engine, r.baseline_engine) == (engine, vs):
            return Span(r.ci95[0], r.ci95[1], "ci95")
        if (r.engine, r.baseline_engine) == (vs, engine) and r.ci95[0] > 0:
            return Span(1 / r.ci95[1], 1 / r.ci95[0], "ci95")
    return None


def measured_ratio(summary: Summary, engine: str, vs: str, precision: str, path: str) -> MeasuredRatio | None:
    """engine / vs from the groups' medians; interval: the summary's 95% CI with 5+ repeats, else the range."""
    top, top_why = _side(_group(summary, engine, precision, path))
    bottom, bottom_why = _side(_group(summary, vs, precision, path))
    if not top or not bottom or not bottom.median or not bottom.min:
        return None
    valid = top_why is None and bottom_why is None
    interval = _summary_ci(summary, engine, vs, precision, path) if valid else None
    if interval is None:
        interval = Span(top.min / bottom.max, top.max / bottom.min, "range")
    why = "; ".join(w for w in (top_why, bottom_why) if w) or None
    return MeasuredRatio(top.median / bottom.median, interval, valid, why)


def _gpu_names(data: ReportData) -> str:
    """The GPUs the runs' telemetry names (NVML), e.g. 'NVIDIA H200'."""
    gpus = sorted({str(device["name"]) for run in data.runs for device in run.gpu.get("devices") or [] if device.get("name")})
    return ", ".join(gpus) or "this machine (no GPU recorded)"


def claims_table(data: ReportData, as_published: ReportData | None = None) -> Table | None:
    """The scenario's claims next to the as-published and the fair measurement, or None without claims."""
    block = data.claims
    if block is None:
        return None
    ratio_span = span(",.2f", "x")
    cols = [*columns("engine / vs", "precision", "path"), Column(f"claimed ({block.hardware})", TIMES),
            Column(f"as published ({_gpu_names(as_published) if as_published else 'not run'})", TIMES),
            Column("as published: interval", ratio_span), Column("as published: validity", text),
            Column(f"fair ({_gpu_names(data)})", TIMES), Column("fair: interval", ratio_span), Column("fair: validity", text),
            Column("fair / claimed", number(".2f")), Column("as stated")]
    cells = []
    for claim in block.ratios:
        path = claim.path
        key = (claim.engine, claim.vs, claim.precision, path)
        published = measured_ratio(as_published.summary, *key) if as_published else None
        fair = measured_ratio(data.summary, *key)
        cells.append([f"{claim.engine} / {claim.vs}", claim.precision, path, claim.claimed,
                      published.ratio if published else None, published.interval if published else None,
                      published.label if published else DASH,
                      fair.ratio if fair else None, fair.interval if fair else None, fair.label if fair else DASH,
                      fair.ratio / claim.claimed if fair and fair.valid else None, claim.as_stated])
    notes = [f"claimed: {block.source}.",
             "as published: the publication's own protocol on this GPU (each engine configured as the publication configured it), "
             + (f"artifact {as_published.artifact_id} ({as_published.summary.scenario})." if as_published
                else "not given: run its scenario (e.g. scenarios/opennn_seed_as_published.yaml) and pass --as-published."),
             f"fair: artifact {data.artifact_id} ({data.summary.scenario}): every engine's fastest correct path.",
             "ratio: median throughput of the engine over the median of the other; interval: bootstrap 95% CI with 5+ valid repeats "
             "a side, else the range of the repeats; apparent: a side whose runs are all invalid, from the throughput its engine "
             "counted, with the work parity found missing (never a measurement); - where either side has no run with a throughput."]
    if block.note:
        notes.append(block.note)
    if data.summary.smoke or (as_published and as_published.summary.smoke):
        notes.append("Smoke run: the measured ratios are not representative.")
    return Table("claims", "Claimed vs measured ratios", cols, cells, notes)


def _first_block_means(data: ReportData, engine: str, precision: str, status: str) -> list[float] | None:
    """The block means of the first run of ``engine`` at ``precision`` with ``status`` (by repeat)."""
    runs = sorted((r for r in data.runs if (r.record.engine, r.record.precision, r.record.status) == (engine, precision, status)
                   and r.result), key=lambda r: r.record.repeat)
    for run in runs:
        means = run.result.measurements.block_losses if run.result and run.result.measurements else ()
        if means:
            return [float(v) for v in means]
    return None


def lost_work_table(data: ReportData, as_published: ReportData | None) -> Table | None:
    """Second signals of the work an invalid as-published run did not do, against the fair run of the same engine:
    how far its weights moved, and how far its block-mean losses stray (None without invalid as-published runs)."""
    from orchestrator.judge.trajectory import relative_deviation

    if as_published is None:
        return None
    cells = []
    for group in as_published.summary.groups:
        apparent = group.apparent
        if not apparent:
            continue
        engine, precision = group.engine, group.precision
        fair = _group(data.summary, engine, precision, group.path)
        moved, honest = apparent.weight_change, fair.weight_change if fair else None
        invalid_means = _first_block_means(as_published, engine, precision, "invalid")
        valid_means = _first_block_means(data, engine, precision, "ok")
        worst = None
        if invalid_means and valid_means:
            worst = max(relative_deviation(a, b) for a, b in zip(invalid_means, valid_means, strict=False))
        cells.append([engine, precision, "; ".join(apparent.reasons), moved, honest,
                      moved / honest if moved is not None and honest else None, worst,
                      sum(invalid_means) / len(invalid_means) if invalid_means else None,
                      sum(valid_means) / len(valid_means) if valid_means else None])
    if not cells:
        return None
    cols = [*columns("engine", "precision", "read back"), Column("weights moved (as published)", number(".4f")),
            Column("weights moved (fair)", number(".4f")), Column("moved / fair", number(".2f")),
            Column("block means: largest deviation from fair", number(".1%")), Column("mean loss (as published)", number(".4f")),
            Column("mean loss (fair)", number(".4f"))]
    notes = ["Two signals independent of the update counter the parity check reads: weights moved is ||w_end - w_0|| / ||w_0|| of the "
             "trainable parameters read back from the engine (median over the repeats); the block means are the mean training "
             "loss of each harness block of the first invalid run against the first valid fair run of the same engine and "
             "precision (same initial weights, data order and blocks)."]
    return Table("lost_work", "Invalid as-published runs against the fair ones: the work they did not do", cols, cells, notes)
