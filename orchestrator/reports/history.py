"""A results history (``bench results history SCENARIO``): one metric of every cell across a scenario's artifacts, over time.

A cell is a summary group (engine, precision, path, per-device batch, devices). For every usable artifact of the
scenario (oldest first) and every cell it measured: the metric's median over the valid repeats with its spread
(the interval the summary gives: the range below 5 repeats, the bootstrap 95% CI from 5), the framework and its
version as the cell's ``result.json`` files recorded them, the artifact's label and GPU, and the change of the median
against the cell's previous artifact: the use case of rebuilding an engine's image on a new framework version and
seeing "PyTorch 2.10.0 -> 2.11.0: +4.0%". The model here is written three ways: a terminal table
(:func:`history_table`, rich through cli/results_view.py), a plot (:func:`history_plot`, PNG or SVG) and a
self-contained HTML page (:func:`render_history_html`, the report's CSS and exporters).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

from orchestrator.judge.summary_model import GroupRow
from orchestrator.reports.catalog import Listed
from orchestrator.reports.formats import DASH, Format, compact_rate, significant, significant_text
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, batch_label, devices_label, view

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
    return History(scenario, metric, tuple(used), tuple(points), tuple(skipped), tuple(warnings))


# ----------------------------------------------------------------------------- outputs


def _change(point: Point) -> str:
    """'+4.0%'; '~+4.0%' when the two artifacts' intervals overlap (within the noise of the repeats)."""
    if point.change_pct is None:
        return DASH
    return ("~" if point.within_spread else "") + f"{point.change_pct:+.1f}%"


def _spread(fmt: Format) -> Format:
    def render(point: Point) -> str:
        if point.low is None or point.high is None:
            return DASH
        return f"{fmt(point.low)}-{fmt(point.high)}"

    return render


def _version(framework: str | None) -> str:
    """The compact table's version: 'PyTorch 2.11.0' as '2.11.0' (the engine names the framework)."""
    if not framework:
        return DASH
    return " | ".join(part.rsplit(" ", 1)[-1] for part in framework.split(" | "))


def _relative_spread(point: Point) -> str:
    """The interval's width as a percentage of the median ('12%'), '-' without one."""
    if point.low is None or point.high is None or not point.median:
        return DASH
    return f"{significant_text((point.high - point.low) / point.median * 100, 2)}%"


def history_table(history: History, wide: bool = False) -> Table:
    """Every point: the cell, the artifact (time, id, label, GPU), the framework version, n, median, spread, change."""
    m = history.metric
    kinds = {p.interval for p in history.points if p.low is not None}
    spread = {"ci95": "95% CI", "range": "range"}.get(next(iter(kinds)), "spread") if len(kinds) == 1 else "interval"
    one_year = len({p.time.year for p in history.points if p.time}) <= 1
    fields = [Field("engine", lambda p: p.cell[0]), Field("precision", lambda p: p.cell[1], short="prec"),
              Field("path", lambda p: p.cell[2], fold=str), Field("batch", lambda p: p.cell[3], fold=batch_label),
              Field("devices", lambda p: p.cell[4], short="dev", fold=devices_label),
              Field("time (UTC)", lambda p: p, lambda p: p.time_text, short="time",
                    compact_fmt=lambda p: p.time.strftime("%m-%d %H:%M") if p.time and one_year else p.time_text),
              Field("artifact", lambda p: p.artifact_id, wide_only=True),
              Field("GPU", lambda p: p.gpu, fold=lambda t: "no GPU" if t == "-" else t),
              Field("framework", lambda p: p.framework, compact_fmt=_version, short="version"),
              Field("n", lambda p: f"{p.n}/{p.n_total}" if p.n_total is not None else str(p.n)),
              Field(f"median {m.unit}", lambda p: p.median, m.fmt, short="median"),
              Field(spread, lambda p: p, _spread(m.fmt), wide_only=True),
              Field("spread", lambda p: p, _relative_spread, compact_only=True),
              Field("change", lambda p: p, _change),
              Field("label", lambda p: p.label + (" (smoke)" if p.smoke else "") if p.label else ("(smoke)" if p.smoke else None),
                    lambda v: v or "", clip=True)]
    notes = [f"{m.name}: {m.description} ({m.unit}, {'higher' if m.higher_is_better else 'lower'} is better), the median over "
             "each artifact's valid repeats; change: against the cell's previous artifact"
             + ("" if wide else f"; spread: the {spread} as % of the median")
             + ("; ~: the two artifacts' intervals overlap (within the noise)" if any(p.within_spread for p in history.points) else "")]
    notes += [f"version {line}" for line in history.transitions()]
    title = f"{history.scenario}: {m.name} over {len(history.artifacts)} artifact(s)"
    return view("history-table", title, fields, list(history.points), wide, notes)


def _tick(entry: Listed) -> str:
    time = entry.time.strftime("%m-%d %H:%M") if entry.time else entry.artifact_id[:15]
    label = entry.label or ""
    return time + ("\n" + (label if len(label) <= 22 else label[:21] + "…") if label else "")


def history_plot(history: History) -> Any:
    """The metric per artifact (x: the artifacts oldest first, evenly spaced), one line per cell in the report's look
    (the engine's colour, the precision's line style), the spread as error bars, the framework version written where
    it changes. A matplotlib Figure."""
    from matplotlib.ticker import FuncFormatter

    from orchestrator.reports.plots import MARKERS, _figure
    from orchestrator.reports.styles import styles_for

    m = history.metric
    cells = history.cells
    styles = styles_for((c[0] for c in cells), (c[1] for c in cells))
    index = {e.artifact_id: i for i, e in enumerate(history.artifacts)}
    width = min(16.0, max(7.0, 0.9 * len(history.artifacts) + 4))
    fig, axes = _figure(width, 4.6)
    ax = axes[0][0]
    variants = sorted({(c[2], c[3], c[4]) for c in cells})
    for cell in cells:
        points = [p for p in history.points if p.cell == cell and p.median is not None]
        if not points:
            continue
        xs = [index[p.artifact_id] for p in points]
        ys = [p.median for p in points]
        lows = [p.median - p.low if p.low is not None else 0 for p in points]
        highs = [p.high - p.median if p.high is not None else 0 for p in points]
        gid = f"history/{cell[0]}/{cell[1]}"
        ax.errorbar(xs, ys, yerr=[lows, highs], color=styles.colour(cell[0]), linestyle=styles.linestyle(cell[1]),
                    marker=MARKERS[variants.index((cell[2], cell[3], cell[4])) % len(MARKERS)], capsize=3,
                    label=cell_label(cell, cells), gid=gid)
        for x, y, p in zip(xs, ys, points, strict=True):
            if p.previous is not None and p.framework != p.previous.framework:  # a new framework version: say which
                last = x == len(history.artifacts) - 1  # the last point's note to its left, inside the axes
                ax.annotate(f"{p.framework or '?'} ({p.change_pct:+.1f}%)", (x, y), textcoords="offset points",
                            xytext=(-5 if last else 5, 6), ha="right" if last else "left", fontsize=7,
                            color=styles.colour(cell[0]), gid=f"{gid}/version/{x}")
    ax.set_xticks(range(len(history.artifacts)), [_tick(e) for e in history.artifacts], fontsize=8)
    ax.set_xlim(-0.5, max(len(history.artifacts) - 0.5, 0.5))
    ax.set_ylabel(f"{m.name} ({m.unit})")
    ax.set_title(f"{history.scenario}: median {m.name} per artifact (bars: spread of the repeats)", fontsize=10)
    tops = [p.high if p.high is not None else p.median for p in history.points if p.median is not None]
    ax.set_ylim(0, max(tops) * 1.15 if tops and max(tops) > 0 else None)  # room above for the version notes
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: significant_text(value, 3) if value else "0"))
    if cells:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def write_plot(history: History, path: Path) -> None:
    """The plot as PNG or SVG (by the file's suffix)."""
    from orchestrator.jsonio import write_text_atomic
    from orchestrator.reports.plots import to_png, to_svg

    fig = history_plot(history)
    if path.suffix.lower() == ".svg":
        write_text_atomic(path, to_svg(fig, salt=f"bench-history-{history.scenario}") + "\n")
    else:
        data = to_png(fig)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


def history_sections(history: History, level: int = 2, current: str | None = None) -> list[str]:
    """The HTML of a history: the plot (inline SVG), the framework version changes, the table, the artifacts, what was
    left out. ``current``: the artifact a report is of (named in the lead)."""
    from orchestrator.reports.html import plot_html, table_html
    from orchestrator.reports.plots import Plot, matplotlib_available

    m = history.metric
    sub = f"h{level + 1}"
    parts = [f'<p class="sub">{len(history.artifacts)} artifact(s) of {escape(history.scenario)}, {len(history.cells)} cell(s), oldest '
             f"first; {escape(m.description)} ({escape(m.unit)}, {'higher' if m.higher_is_better else 'lower'} is better)"
             + (f"; this report's artifact: {escape(current)}" if current else "") + "</p>"]
    ok, why = matplotlib_available()
    if ok and history.points:
        caption = ("The median of every cell per artifact; the bars are the spread of its repeats; the new framework version "
                   "is written where it changes.")
        parts.append(plot_html(Plot("history", f"{m.name} per artifact", caption, history_plot(history))))
    else:
        parts.append(f'<p class="note">{escape(why or "nothing to plot")}</p>')
    transitions = history.transitions()
    parts.append(f'<{sub} id="history-versions">Framework version changes</{sub}>')
    parts.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in transitions) + "</ul>" if transitions
                 else '<p class="note">(none: every cell kept its framework version)</p>')
    parts.append(table_html(history_table(history, wide=True), level=level + 1))
    parts.append(table_html(artifacts_table(history), level=level + 1))
    parts += [f'<p class="note">warning: {escape(warning)}</p>' for warning in history.warnings]
    if history.skipped:
        parts.append(f'<{sub} id="history-skipped">Left out</{sub}><ul>'
                     + "".join(f"<li>{escape(p)}: {escape(w)}</li>" for p, w in history.skipped) + "</ul>")
    return parts


def render_history_html(history: History, generated: str) -> str:
    """A self-contained page of the history, in the report's look (its CSS; no external resource)."""
    from orchestrator.reports.html import CSS, RENDER_CHECK

    title = f"{history.scenario}: {history.metric.name} history"
    body = [f"<h1>Results history: {escape(title)}</h1>", *history_sections(history),
            f"<footer>Generated by bench on {escape(generated)}; self-contained (no external resources).</footer>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">\n"
            f"<title>bench history: {escape(title)}</title>\n<style>{CSS}</style>\n"
            f"<script>{RENDER_CHECK}</script>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")


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


def artifacts_table(history: History) -> Table:
    """The artifacts of the history: time, id, label, GPU, runs ok/total, path."""
    fields = [Field("time (UTC)", lambda e: e.time.strftime("%Y-%m-%d %H:%M") if e.time else None),
              Field("artifact", lambda e: e.artifact_id), Field("label", lambda e: e.label, lambda v: v or ""),
              Field("GPU", lambda e: e.gpu), Field("runs ok/total", lambda e: "{}/{}".format(*e.runs) if e.runs else None),
              Field("path", lambda e: str(e.path))]
    return view("history-artifacts", "Artifacts", fields, list(history.artifacts), True)
