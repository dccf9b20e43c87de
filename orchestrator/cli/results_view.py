"""Rich exporter of a table, and the tables of a summary as ``bench results show`` prints them."""

from __future__ import annotations

from typing import Any

from rich.table import Table as RichTable

from orchestrator.cli.console import out, status_text
from orchestrator.reports.tables import Table
from orchestrator.terminal import markup, markup_lines


def rich_table(table: Table) -> RichTable:
    """The table for the terminal: its cells as text (plain, never markup), statuses coloured, notes as the caption.

    Long cells fold onto more lines rather than being cut, so every figure stays readable on a narrow terminal.
    """
    rich = RichTable(title=markup(table.title) or None, caption=markup_lines("\n".join(table.notes)) or None)
    for column in table.columns:
        rich.add_column(markup(column.header), overflow="fold")
    for row in table.rows:
        rich.add_row(*(status_text(text) if column.status else markup(text) for column, text in zip(table.columns, row, strict=True)))
    return rich


def render_summary(summary: dict[str, Any]) -> None:
    from orchestrator.reports.summary_tables import summary_tables

    for table in summary_tables(summary):
        out.print(rich_table(table))
