"""Reports of an artifact: Markdown, a self-contained HTML page, CSV exports and plots.

``build_report(source, out_dir, html=...)`` reads the artifact (never modifying it) and writes into
``out_dir``: ``report.md`` (+ ``plot-*.png`` beside it when matplotlib is installed), ``runs.csv``,
``groups.csv`` and, with ``html``, ``report.html``. The default ``out_dir`` is
``<results>/reports/<scenario>/<artifact-id>-report/`` for an artifact ``<results>/<scenario>/<artifact-id>/``
(see ``default_report_dir``): beside the scenario folders, never among the artifacts.

Every table is one model (tables.py: columns and typed cells, formats.py: how a cell reads as text), built by
tables.py (the report; its Host, Engines and GPUs tables in environment.py), raw_tables.py (the CSV files) and
summary_tables.py (the terminal), and written by one small exporter per format: markdown.py, html.py, csvout.py and,
for the terminal, orchestrator/cli/results_view.py. plots.py draws the figures (PNG beside report.md, inline SVG in
report.html) in one look per engine and precision (styles.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.artifacts.layout import REPORTS, results_root
from orchestrator.clock import utc_now
from orchestrator.errors import BadInput
from orchestrator.jsonio import write_text_atomic
from orchestrator.reports.data import ReportData, load_report_data

__all__ = ["ReportData", "build_report", "default_report_dir", "load_report_data"]


def default_report_dir(source: Path, scenario: str, artifact_id: str) -> Path:
    """``<results>/reports/<scenario>/<artifact-id>-report`` (see :func:`~orchestrator.artifacts.layout.results_root`)."""
    return results_root(source, scenario) / REPORTS / scenario / f"{artifact_id}-report"


def build_report(data: ReportData, out_dir: Path, html: bool = False, artifact_root: Path | None = None,
                 history: Any = None) -> dict[str, Path]:
    """Write the report files; returns {kind: path}. BadInput when ``out_dir`` lies inside the artifact."""
    from orchestrator.reports import csvout, markdown, plots, raw_tables, tables

    out_dir = out_dir.resolve()
    if artifact_root is not None and out_dir.is_relative_to(artifact_root.resolve()):
        raise BadInput(f"--out {out_dir}: inside the artifact (a report there would break its manifest)")
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"--out {out_dir}: exists and is not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--out {out_dir}: cannot create it ({exc.strerror or exc})") from None
    all_tables = tables.all_tables(data)
    ok, plot_note = plots.matplotlib_available()
    figures = plots.all_plots(data) if ok else []
    if ok and not any(p.key == "telemetry" for p in figures):
        reasons = list(data.summary.telemetry.reasons) if data.summary.telemetry else []
        plot_note = "No GPU telemetry to plot" + (f" ({'; '.join(reasons)})." if reasons else ".")
    written: dict[str, Path] = {}
    images = []
    for plot in figures:
        name = f"plot-{plot.key}.png"
        (out_dir / name).write_bytes(plots.to_png(plot.figure))
        written[f"png:{plot.key}"] = out_dir / name
        images.append((plot.title, name, plot.caption))
    written["markdown"] = out_dir / "report.md"
    write_text_atomic(written["markdown"], markdown.render_markdown(data, all_tables, images, plot_note))
    written["runs_csv"] = out_dir / "runs.csv"
    write_text_atomic(written["runs_csv"], csvout.to_csv(raw_tables.runs_data(data)))
    written["groups_csv"] = out_dir / "groups.csv"
    write_text_atomic(written["groups_csv"], csvout.to_csv(raw_tables.groups_data(data)))
    if html:
        from orchestrator.reports.html import render_html

        sections = []
        if history is not None:  # --history: the scenario's artifacts around this one (reports/history.py)
            from orchestrator.reports.history_views import history_sections

            sections.append(("history", "History", history_sections(history, level=3, current=data.artifact_id)))
        written["html"] = out_dir / "report.html"
        write_text_atomic(written["html"], render_html(data, all_tables, figures, plot_note, utc_now(), sections))
    return written
