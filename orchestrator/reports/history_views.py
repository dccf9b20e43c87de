"""The results history written out: the terminal table (:func:`history_table`), the plot (:func:`history_plot`,
PNG or SVG), the HTML sections and page (:func:`history_sections`, :func:`render_history_html`); the model and its
loading are ``reports/history.py``."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from orchestrator.reports.catalog import Listed
from orchestrator.reports.formats import DASH, Format, significant_text
from orchestrator.reports.history import History, Point, cell_label
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, batch_label, devices_label, view


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


def artifacts_table(history: History) -> Table:
    """The artifacts of the history: time, id, label, GPU, runs ok/total, path."""
    fields = [Field("time (UTC)", lambda e: e.time.strftime("%Y-%m-%d %H:%M") if e.time else None),
              Field("artifact", lambda e: e.artifact_id), Field("label", lambda e: e.label, lambda v: v or ""),
              Field("GPU", lambda e: e.gpu), Field("runs ok/total", lambda e: "{}/{}".format(*e.runs) if e.runs else None),
              Field("path", lambda e: str(e.path))]
    return view("history-artifacts", "Artifacts", fields, list(history.artifacts), True)
