"""HTML exporter: the self-contained report page of the tables; inline CSS, plots as inline SVG, no external resource of any kind.

A few lines of inline script mark, once the page has loaded, how many plots the browser laid out
(``<body data-plots-rendered="k/n">``); the tests read it back from headless Chromium.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from orchestrator.reports.data import ReportData
from orchestrator.reports.plots import Plot, to_svg
from orchestrator.reports.tables import Column, Table

CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --head:#f6f8fa; --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg); margin: 0 auto;
       max-width: 1280px; padding: 24px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 1px solid var(--line);
       padding-bottom: 4px; } h3 { font-size: 16px; margin: 18px 0 6px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fbfcfd; }
.status-ok { color: var(--ok); font-weight: 600; } .status-failed, .status-timeout { color: var(--bad); font-weight: 600; }
.status-invalid, .status-interrupted { color: var(--warn); font-weight: 600; } .status-skipped { color: var(--muted); }
.note { color: var(--muted); font-size: 12.5px; margin: 2px 0; }
figure.plot { margin: 12px 0 20px; } figure.plot svg { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12.5px; }
nav a { margin-right: 12px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
"""

RENDER_CHECK = """
window.addEventListener('load', function () {
  var svgs = document.querySelectorAll('figure.plot svg');
  var ok = 0;
  svgs.forEach(function (svg) { var box = svg.getBoundingClientRect(); if (box.width > 0 && box.height > 0) { ok++; } });
  document.body.setAttribute('data-plots-rendered', ok + '/' + svgs.length);
});
"""

_NUMERIC = set("0123456789.,-x% ")


def _td(text: str, column: Column) -> str:
    cls = []
    if column.status:
        cls.append(f"status-{escape(text)}")
    elif column.header != "value" and text and all(ch in _NUMERIC for ch in text) and any(ch.isdigit() for ch in text):
        cls.append("num")
    attr = f' class="{" ".join(cls)}"' if cls else ""
    return f"<td{attr}>{escape(text)}</td>"


def table_html(table: Table, level: int = 2) -> str:
    parts = [f'<h{level} id="{escape(table.key)}">{escape(table.title)}</h{level}>']
    if table.cells:
        head = "".join(f"<th>{escape(c)}</th>" for c in table.headers)
        body = "\n".join("<tr>" + "".join(_td(cell, col) for cell, col in zip(row, table.columns, strict=False)) + "</tr>"
                         for row in table.rows)
        parts.append(f'<div class="scroll"><table data-table="{escape(table.key)}"><thead><tr>{head}</tr></thead>'
                     f"<tbody>\n{body}\n</tbody></table></div>")
    else:
        parts.append('<p class="note">(none)</p>')
    parts += [f'<p class="note">{escape(note)}</p>' for note in table.notes]
    return "\n".join(parts)


def plot_html(plot: Plot) -> str:
    svg = to_svg(plot.figure, salt=f"bench-{plot.key}")
    return (f'<figure class="plot" data-plot="{escape(plot.key)}"><h3>{escape(plot.title)}</h3>\n{svg}\n'
            f"<figcaption>{escape(plot.caption)}</figcaption></figure>")


def render_html(data: ReportData, tables: list[Table], plots: list[Plot], plot_note: str | None, generated: str,
                sections: Sequence[tuple[str, str, list[str]]] = ()) -> str:
    """The page; ``sections``: (id, title, HTML parts) added before the environment (the history of ``--history``)."""
    s = data.summary
    title = f"{s.scenario} {s.artifact_id}" + (" (smoke)" if s.smoke else "")
    environment = {"host", "engines", "gpus"}
    main_tables = [t for t in tables if t.key not in environment]
    nav = " ".join(f'<a href="#{escape(t.key)}">{escape(t.title)}</a>' for t in main_tables)
    body = [f"<h1>Benchmark report: {escape(title)}</h1>",
            f'<p class="sub">bench artifact {escape(data.source)}</p>',
            f"<nav>{nav} <a href=\"#plots\">Plots</a>"
            + "".join(f' <a href="#{escape(key)}">{escape(name)}</a>' for key, name, _ in sections)
            + " <a href=\"#environment\">Environment</a></nav>"]
    body += [table_html(t) for t in main_tables]
    body.append('<h2 id="plots">Plots</h2>')
    if plots:
        body += [plot_html(p) for p in plots]
    if plot_note:
        body.append(f'<p class="note">{escape(plot_note)}</p>')
    for key, name, parts in sections:
        body += [f'<h2 id="{escape(key)}">{escape(name)}</h2>', *parts]
    body.append('<h2 id="environment">Environment</h2>')
    body += [table_html(t, level=3) for t in tables if t.key in environment]
    body.append(f"<footer>Generated by bench on {escape(generated)} from {escape(data.source)}; "
                "self-contained (no external resources).</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">\n"
            f"<title>bench report: {escape(title)}</title>\n<style>{CSS}</style>\n"
            f"<script>{RENDER_CHECK}</script>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")
