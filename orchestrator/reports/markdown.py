"""Markdown exporter: the report's tables, plus the plots as PNG files beside it when matplotlib is present."""

from __future__ import annotations

from orchestrator.reports.data import ReportData
from orchestrator.reports.tables import Table


def _cell(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip() or " "


def table_md(table: Table, level: int = 2) -> str:
    lines = [f"{'#' * level} {table.title}", ""]
    if table.cells:
        header, body = table.headers, table.rows
        lines.append("| " + " | ".join(_cell(c) for c in header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
        lines.append("")
    else:
        lines += ["(none)", ""]
    lines += [f"_{note}_" + "\n" for note in table.notes]
    return "\n".join(lines).rstrip() + "\n"


def render_markdown(data: ReportData, tables: list[Table], images: list[tuple[str, str, str]], plot_note: str | None) -> str:
    """``images``: (title, file name, caption) of the plots written beside the report."""
    s = data.summary
    parts = [f"# Benchmark report: {s.scenario} {s.artifact_id}" + (" (smoke)" if s.smoke else ""), ""]
    environment = {"host", "engines", "gpus"}
    for table in tables:
        if table.key in environment:
            continue
        parts.append(table_md(table))
    parts.append("## Plots\n")
    for title, name, caption in images:
        parts.append(f"### {title}\n\n![{title}]({name})\n\n_{caption}_\n")
    if plot_note or not images:
        parts.append((plot_note or "No plot (nothing to plot).") + "\n")
    parts.append("## Environment\n")
    for table in tables:
        if table.key in environment:
            parts.append(table_md(table, level=3))
    return "\n".join(parts).rstrip() + "\n"
