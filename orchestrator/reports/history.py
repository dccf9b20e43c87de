"""A results history (``bench results history SCENARIO``): one metric of every cell across a scenario's artifacts, over time.

A cell is a summary group (engine, precision, path, per-device batch, devices). For every usable artifact of the
scenario (oldest first) and every cell it measured: the metric's median over the valid repeats with its spread
(the interval the summary gives: the range below 5 repeats, the bootstrap 95% CI from 5), the framework and its
version as the cell's ``result.json`` files recorded them, the artifact's label and GPU, and the change of the median
against the cell's previous artifact: the use case of rebuilding an engine's image on a new framework version and
seeing "PyTorch 2.10.0 -> 2.11.0: +4.0%". The model here is written three ways: a terminal table
(`reports/history_views.py`: :func:`history_table`, rich through cli/results_view.py), a plot (:func:`history_plot`, PNG or SVG) and a
self-contained HTML page (:func:`render_history_html`, the report's CSS and exporters).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.judge.summary_model import GroupRow
from orchestrator.reports.catalog import Listed
from orchestrator.reports.formats import DASH, Format, compact_rate, significant

Cell = tuple[str, str, str, int, int]  # engine, precision, path, batch per device, devices


@dataclass(frozen=True)
class Metric:
    """A metric of a summary group: its name, unit, whether higher is better, and its statistics (or a bare value)."""

    name: str
    unit: str
    higher_is_better: bool
    value: Callable[[GroupRow], Any]  # a SampleSummary, a float or None
    fmt: Format
    description: str


def _rate(value: Any) -> str:
    return compact_rate(value)


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("throughput", "samples/s", True, lambda g: g.throughput, _rate, "steady-state samples/s"),
    Metric("energy", "J/sample", False, lambda g: g.energy_per_sample_j, significant(3), "GPU energy per sample"),
    Metric("power", "W", False, lambda g: g.power_w, significant(3), "mean GPU power"),
    Metric("setup", "s", False, lambda g: g.setup_s, significant(3), "engine setup time"),
    Metric("warmup", "s", False, lambda g: g.warmup_s, significant(3), "warmup time"),
    Metric("tflops", "TFLOP/s", True, lambda g: g.achieved_tflops, significant(3), "achieved TFLOP/s (median throughput x FLOPs)"),
)}


ENERGY_METRICS = frozenset({"energy", "power"})  # the steady window's in new artifacts, the whole process's in older ones


@dataclass(frozen=True)
class Point:
    """One cell in one artifact."""

    cell: Cell
    artifact_id: str
    time: datetime | None
    path: str
    label: str | None
    smoke: bool
    gpu: str | None
    framework: str | None  # 'PyTorch 2.11.0' (several joined with ' | ' when the cell's runs differ)
    n: int  # valid repeats
    n_total: int | None
    median: float | None
    low: float | None = None
    high: float | None = None
    interval: str | None = None  # 'range' | 'ci95' | None
    change_pct: float | None = None  # the median against the cell's previous artifact with one
    within_spread: bool | None = None  # the two artifacts' intervals overlap (both with 2+ repeats)
    previous: Point | None = field(default=None, repr=False, compare=False)

    @property
    def time_text(self) -> str:
        return self.time.strftime("%Y-%m-%d %H:%M") if self.time else DASH

    def to_json(self) -> dict[str, Any]:
        engine, precision, path, batch, devices = self.cell
        return {"engine": engine, "precision": precision, "path": path, "batch_per_device": batch, "devices": devices,
                "artifact_id": self.artifact_id, "artifact": self.path,
                "time": self.time.strftime("%Y-%m-%dT%H:%M:%SZ") if self.time else None, "label": self.label,
                "smoke": self.smoke, "gpu": self.gpu, "framework": self.framework, "n": self.n, "n_total": self.n_total,
                "median": self.median, "interval": ({"kind": self.interval, "low": self.low, "high": self.high}
                                                    if self.low is not None else None),
                "change_pct": self.change_pct, "within_spread": self.within_spread,
                "previous_artifact_id": self.previous.artifact_id if self.previous else None}


@dataclass(frozen=True)
class History:
    scenario: str
    metric: Metric
    artifacts: tuple[Listed, ...]  # oldest first, the ones with a point
    points: tuple[Point, ...]  # by cell, then oldest first
    skipped: tuple[tuple[str, str], ...] = ()  # (path, why) of the scenario's artifacts left out
    warnings: tuple[str, ...] = ()

    @property
    def cells(self) -> list[Cell]:
        return list(dict.fromkeys(p.cell for p in self.points))

    def transitions(self) -> list[str]:
        """One line per change of framework version within a cell: 'pytorch fp32: PyTorch 2.10.0 -> 2.11.0: +4.0%'."""
        lines = []
        for p in self.points:
            before = p.previous
            if before is None or before.framework == p.framework or p.change_pct is None:
                continue
            noise = " (within the spread)" if p.within_spread else ""
            lines.append(f"{cell_label(p.cell, self.cells)}: {before.framework or '?'} -> {p.framework or '?'}: "
                         f"{p.change_pct:+.1f}%{noise} ({before.time_text} -> {p.time_text})")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "metric": self.metric.name, "unit": self.metric.unit,
                "higher_is_better": self.metric.higher_is_better,
                "artifacts": [a.to_json() for a in self.artifacts], "points": [p.to_json() for p in self.points],
                "transitions": self.transitions(), "skipped": [{"path": p, "problem": why} for p, why in self.skipped],
                "warnings": list(self.warnings)}


def cell_label(cell: Cell, cells: Sequence[Cell] = ()) -> str:
    """'pytorch fp32', with the path, batch and devices when the cells differ in them."""
    engine, precision, path, batch, devices = cell
    extra = []
    if len({c[2] for c in cells}) > 1:
        extra.append(path)
    if len({c[3] for c in cells}) > 1:
        extra.append(f"b{batch}")
    if len({c[4] for c in cells}) > 1:
        extra.append(f"x{devices}")
    return " ".join([engine, precision, *extra])


# ----------------------------------------------------------------------------- reading


def _document(root: Path, rel: str) -> dict[str, Any]:
    from orchestrator.artifacts.walk import read_bytes_no_follow

    try:
        document = json.loads(read_bytes_no_follow(root, rel, 256 << 20))
    except (OSError, ValueError, RecursionError):
        return {}
    return document if isinstance(document, dict) else {}


def cell_frameworks(root: Path, summary: Any) -> dict[Cell, str | None]:
    """Per cell, the framework and version its started runs' result.json recorded ('PyTorch 2.11.0')."""
    from orchestrator.artifacts.layout import RUNS

    seen: dict[Cell, set[str]] = {}
    for row in summary.runs:
        if row.status == "skipped":
            continue
        environment = _document(root, f"{RUNS}/{row.run_id}/result.json").get("environment") or {}
        name = " ".join(str(environment[k]) for k in ("framework", "framework_version") if environment.get(k))
        cell = (row.engine, row.precision, row.path, row.batch_per_device, row.devices)
        seen.setdefault(cell, set())
        if name:
            seen[cell].add(name)
    return {cell: " | ".join(sorted(names)) or None for cell, names in seen.items()}


@dataclass(frozen=True)
class Filters:
    engines: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    batches: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()

    def keep(self, cell: Cell) -> bool:
        engine, precision, path, batch, devices = cell
        return ((not self.engines or engine in self.engines) and (not self.precisions or precision in self.precisions)
                and (not self.paths or path in self.paths) and (not self.batches or batch in self.batches)
                and (not self.devices or devices in self.devices))


def _stats(metric: Metric, group: GroupRow) -> tuple[float | None, float | None, float | None, str | None]:
    """(median, low, high, interval kind) of the metric in a group."""
    value = metric.value(group)
    if value is None:
        return None, None, None, None
    if isinstance(value, int | float):
        return float(value), None, None, None
    interval = value.interval
    if interval is not None:
        return value.median, interval.low, interval.high, interval.kind
    return value.median, value.min, value.max, "range"


def artifact_points(entry: Listed, root: Path, metric: Metric, filters: Filters) -> list[Point]:
    """The points of one usable artifact (``root``: its readable folder)."""
    summary = entry.summary
    frameworks = cell_frameworks(root, summary)
    points = []
    for group in summary.groups:
        cell = (group.engine, group.precision, group.path, group.batch_per_device, group.devices)
        if not filters.keep(cell):
            continue
        median, low, high, kind = _stats(metric, group)
        points.append(Point(cell, entry.artifact_id, entry.time, str(entry.path), entry.label, summary.smoke, entry.gpu,
                            frameworks.get(cell), group.n, group.n_total, median, low, high, kind))
    return points


def _linked(points: list[Point]) -> list[Point]:
    """The points of one cell (oldest first), each with the change against the previous one with a median."""
    out: list[Point] = []
    before: Point | None = None
    for p in points:
        if p.median is not None and before is not None and before.median:
            overlap = None
            if p.n >= 2 and before.n >= 2 and None not in (p.low, p.high, before.low, before.high):
                overlap = p.low <= before.high and before.low <= p.high  # type: ignore[operator]
            p = replace(p, change_pct=(p.median / before.median - 1) * 100, within_spread=overlap, previous=before)
        out.append(p)
        if p.median is not None:
            before = p
    return out


def build_history(scenario: str, metric: Metric, entries: Sequence[Listed], read: Callable[[Listed], list[Point]],
                  skipped: Sequence[tuple[str, str]] = ()) -> History:
    """The history of ``entries`` (usable artifacts of the scenario, any order): ``read`` gives an artifact's points."""
    earliest = datetime.min
    ordered = sorted(entries, key=lambda e: (e.time.replace(tzinfo=None) if e.time else earliest, e.artifact_id))
    by_cell: dict[Cell, list[Point]] = {}
    used = []
    for entry in ordered:
        points = read(entry)
        if points:
            used.append(entry)
        for p in points:
            by_cell.setdefault(p.cell, []).append(p)
    points = [p for cell in sorted(by_cell, key=lambda c: tuple(map(str, c))) for p in _linked(by_cell[cell])]
    warnings = []
    if len({e.summary.smoke for e in used}) > 1:
        warnings.append("the history mixes smoke and full artifacts (smoke runs are shrunk: their figures are not comparable)")
    gpus = {e.gpu for e in used}
    if len(gpus) > 1:
        warnings.append("the artifacts ran on different GPUs: " + ", ".join(sorted(g or "none" for g in gpus)))
    definitions = {e.summary.telemetry.energy_definition for e in used if e.summary.telemetry is not None}
    if metric.name in ENERGY_METRICS and len(definitions) > 1:
        warnings.append("the artifacts' energy figures are defined differently (a change of definition is not a change "
                        "of the engine): " + " | ".join(sorted(definitions)))
    return History(scenario, metric, tuple(used), tuple(points), tuple(skipped), tuple(warnings))


# ----------------------------------------------------------------------------- outputs


def load_history(root: Path, scenario: str, metric: Metric, filters: Filters | None = None, validate: bool = False) -> History:
    """The history of ``scenario``'s artifacts under the results folder ``root`` (its unusable ones left out, named)."""
    from orchestrator.reports.catalog import opened, scan

    usable: dict[str, Listed] = {}
    skipped = []
    for entry in scan(root, scenario, validate):
        if entry.usable:
            usable.setdefault(entry.artifact_id, entry)  # newest first: the folder before its archive
        else:
            skipped.append((str(entry.path), entry.problem or "unusable"))

    def read(entry: Listed) -> list[Point]:
        with opened(entry) as artifact_root:
            return artifact_points(entry, artifact_root, metric, filters or Filters())

    return build_history(scenario, metric, list(usable.values()), read, skipped)
