"""The one table model every output shares: columns (a header and the format of their cells) and rows of typed cells
(None, numbers, strings, :class:`~orchestrator.reports.formats.Span` ...). Each output is a small exporter of it:
reports/markdown.py, reports/html.py, reports/csvout.py (the cells as they are) and cli/results_view.py (Rich)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.reports.formats import Format, text


@dataclass(frozen=True)
class Column:
    """A column: its header and how its typed cells read as text."""

    header: str
    fmt: Format = text
    status: bool = False  # the cells are run statuses (the terminal and the HTML page colour them)


@dataclass
class Table:
    """A titled table: columns, rows of typed cells, and notes under it."""

    key: str
    title: str
    columns: list[Column]
    cells: list[list[Any]]  # typed cells, one list per row, in column order
    notes: list[str] = field(default_factory=list)

    @property
    def headers(self) -> list[str]:
        return [column.header for column in self.columns]

    @property
    def rows(self) -> list[list[str]]:
        """The cells as text, each through its column's format."""
        return [[column.fmt(cell) for column, cell in zip(self.columns, row, strict=True)] for row in self.cells]


def columns(*headers: str) -> list[Column]:
    """Plain-text columns."""
    return [Column(header) for header in headers]
