"""Rich exporter of a table, and the tables of an artifact as ``bench results show`` (and the end of a run) prints them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from orchestrator.cli.console import STATUS_STYLE, err, out, print_json, print_warning
from orchestrator.judge.summary_model import Summary
from orchestrator.reports.model import Table
from orchestrator.reports.views import Clipped, Wrapped
from orchestrator.terminal import markup, markup_lines, visible, visible_lines

WideOption = typer.Option(False, "--wide", help="Every column, nothing cut (the default is a compact table that fits 80 columns).")
NUMERIC = re.compile(r"[-+(]?[\d,.]+(e[-+]?\d+)?[x%)]?|-|n/a|")  # a cell a number column holds (right-aligned)


def _cell(text: str, status: bool, clipped: bool) -> Text:
    """One cell as plain text (never markup; control characters escaped), a status coloured, a clipped one on one line."""
    style = STATUS_STYLE.get(text, "white") if status else ""
    return Text(visible(text), style=style, no_wrap=clipped or None, overflow="ellipsis" if clipped else None)


def rich_table(table: Table, wide: bool = False) -> RenderableType:
    """The table for the terminal: its cells as text (plain, never markup), statuses coloured, then its notes.

    ``wide``: long cells fold onto more lines rather than being cut, so every figure stays whole; the notes are the
    caption. Compact (``wide=False``): a light frame, two spaces between columns, every cell on one line but those
    of :class:`Wrapped` columns (wrapped between words); only those and :class:`Clipped` columns give up width, a
    clipped text cut with an ellipsis (``--wide`` shows it whole); the title and notes as wide as the terminal.
    """
    rows = table.rows
    notes = markup_lines("\n".join(table.notes)) or None
    if wide:
        rich = RichTable(title=markup(table.title) or None, caption=notes)
    else:
        rich = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for index, column in enumerate(table.columns):
        numeric = any(row[index] not in ("-", "", "n/a") for row in rows) and all(NUMERIC.fullmatch(row[index]) for row in rows)
        clipped = not wide and isinstance(column, Clipped)
        header = Text(visible(column.header), no_wrap=clipped or None, overflow="ellipsis" if clipped else None)
        rich.add_column(header, justify="right" if numeric else "left", overflow="fold" if wide else "ellipsis",
                        no_wrap=not wide and not clipped and not isinstance(column, Wrapped))
    for row in rows:
        rich.add_row(*(_cell(text, column.status, not wide and isinstance(column, Clipped))
                       for column, text in zip(table.columns, row, strict=True)))
    if wide:
        return rich
    title = [Text(visible(table.title), style="bold")] if table.title else []  # as wide as the terminal, not the table
    return Group(*title, rich, *([Text(visible_lines("\n".join(table.notes)), style="dim")] if table.notes else []))


def print_tables(tables: list[Table], wide: bool) -> None:
    """The tables on stdout, a blank line between two compact ones."""
    for index, table in enumerate(tables):
        if index and not wide:
            out.print()
        out.print(rich_table(table, wide))


def print_warnings(warnings: list[str]) -> None:
    """Top-level warnings, once each, on stderr."""
    for warning in dict.fromkeys(warnings):
        err.print(f"[yellow]warning[/] {markup(warning)}")


def render_summary(summary: Summary, wide: bool = False, root: Path | None = None) -> list[str]:
    """Print the tables of a summary (the claims of the artifact's scenario with them when ``root`` is given), then
    the warnings of the artifact's runs (runtimes or images that differ); returns those warnings."""
    from orchestrator.judge.runtime_use import artifact_warnings
    from orchestrator.reports.data import artifact_claims
    from orchestrator.reports.summary_tables import summary_tables

    print_tables(summary_tables(summary, wide, artifact_claims(root) if root else None), wide)
    warnings = artifact_warnings(root, summary) if root else []
    print_warnings(warnings)
    return warnings


def with_warnings(document: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The document for --json with a ``warnings`` list (after any it already has)."""
    return {**document, "warnings": [*(document.get("warnings") or []), *warnings]}


def print_outcome(root: Path, summary: Summary, as_json: bool, wide: bool) -> None:
    """The end of a run or resume: the summary's tables and the artifact's warnings, or them as JSON."""
    from orchestrator.judge.runtime_use import artifact_warnings

    if as_json:  # no tables to carry the groups' warnings: they go to stderr, beside the progress
        from orchestrator.judge.trust import warning_lines

        for line in warning_lines(summary.groups):
            print_warning(line)
        print_json(with_warnings({"artifact": str(root), **summary.to_json()}, artifact_warnings(root, summary)))
        return
    render_summary(summary, wide, root)  # the groups' warnings: footnotes under the statistics table
    err.print(f"artifact: [bold]{markup(str(root))}[/]")
