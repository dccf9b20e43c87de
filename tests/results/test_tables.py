"""One table model: the same typed cells read as text in Markdown, HTML and the terminal, and raw in CSV."""

from __future__ import annotations

import csv
import io

from rich.console import Console

from orchestrator.cli.results_view import rich_table
from orchestrator.reports.csvout import to_csv
from orchestrator.reports.formats import PERCENT, RATE, TIMES, Span, span
from orchestrator.reports.html import table_html
from orchestrator.reports.markdown import table_md
from orchestrator.reports.tables import Column, Table

TABLE = Table("t", "[smoke] demo", [Column("engine"), Column("status", status=True), Column("samples/s", RATE), Column("ratio", TIMES),
                                    Column("interval", span(",.2f", "x")), Column("efficiency", PERCENT)],
              [["jax", "ok", 1234.56, 1.9, Span(1.7, 2.1, "ci95"), 0.965], ["pytorch [x]", "failed", None, None, None, None]],
              ["a note"])


def test_every_format_reads_the_same_text() -> None:
    assert TABLE.rows == [["jax", "ok", "1,234.6", "1.90x", "95% CI 1.70x - 2.10x", "96.5%"], ["pytorch [x]", "failed", "-", "-", "-", "-"]]
    assert "| jax | ok | 1,234.6 | 1.90x | 95% CI 1.70x - 2.10x | 96.5% |" in table_md(TABLE)
    page = table_html(TABLE)
    assert '<td class="status-failed">failed</td>' in page and '<td class="num">1,234.6</td>' in page
    buffer = io.StringIO()
    Console(file=buffer, width=200, highlight=False).print(rich_table(TABLE))
    text = buffer.getvalue()
    assert "[smoke] demo" in text and "pytorch [x]" in text  # plain text, never markup
    assert "95% CI 1.70x - 2.10x" in text and "a note" in text


def test_csv_writes_the_typed_cells_raw() -> None:
    rows = list(csv.reader(io.StringIO(to_csv(TABLE))))
    assert rows[0] == ["engine", "status", "samples/s", "ratio", "interval", "efficiency"]
    assert rows[1][:4] == ["jax", "ok", "1234.56", "1.9"] and rows[1][5] == "0.965"
    assert rows[2] == ["pytorch [x]", "failed", "", "", "", ""]
