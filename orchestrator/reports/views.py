"""Terminal table views: one list of fields gives both the compact table (the default, made to fit 80 columns) and
the wide one (``--wide``: every column, nothing cut).

A compact table leaves out the fields marked ``wide_only``, uses the shorter header and format of a field where it
has one, moves a ``fold`` field whose every row reads the same into the title ('optimized, batch 128, 1 device'),
and marks ``clip`` fields as :class:`Clipped` (the terminal cuts their text to the width left, with an ellipsis) and
``wrap`` fields as :class:`Wrapped` (their text wraps between words). Every other cell stays on one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.reports.formats import INTERVAL_LABELS, Format, Span, plural, span_of, text
from orchestrator.reports.model import Column, Table


@dataclass(frozen=True)
class Clipped(Column):
    """A text column that a compact terminal table cuts to the width left, with an ellipsis (``--wide``: whole)."""


@dataclass(frozen=True)
class Wrapped(Column):
    """A text column whose cells a compact terminal table wraps between words, never inside one."""


@dataclass(frozen=True)
class Field:
    """One column of a terminal view: its header, its cell of a row, and how the compact table shows it."""

    header: str
    cell: Callable[[Any], Any]
    fmt: Format = text
    compact_fmt: Format | None = None  # the compact table's format (default: fmt)
    short: str | None = None  # the compact table's header (default: header)
    wide_only: bool = False  # only with --wide
    compact_only: bool = False  # only in the compact table (a wide one shows the same in other columns)
    clip: bool = False  # compact: cut to the width left, with an ellipsis
    wrap: bool = False  # compact: wrapped between words to the width left
    status: bool = False  # the cells are statuses or verdicts (coloured)
    fold: Callable[[str], str] | None = None  # compact: the same text in every row moves to the title as fold(text)


def view(key: str, title: str, fields: Sequence[Field], rows: Sequence[Any], wide: bool, notes: Iterable[str] = ()) -> Table:
    """The table of ``rows``: every field when ``wide``, else the compact choice of fields (see the module)."""
    if wide:
        shown = [f for f in fields if not f.compact_only]
        columns = [Column(f.header, f.fmt, f.status) for f in shown]
        return Table(key, title, columns, [[f.cell(row) for f in shown] for row in rows], list(notes))
    kept: list[Field] = []
    folded: list[str] = []
    for f in fields:
        if f.wide_only:
            continue
        if f.fold is not None and rows:
            texts = {(f.compact_fmt or f.fmt)(f.cell(row)) for row in rows}
            if len(texts) == 1:
                folded.append(f.fold(texts.pop()))
                continue
        kept.append(f)
    columns = [(Clipped if f.clip else Wrapped if f.wrap else Column)(f.short or f.header, f.compact_fmt or f.fmt, f.status) for f in kept]
    heading = f"{title} ({', '.join(folded)})" if folded else title
    return Table(key, heading, columns, [[f.cell(row) for f in kept] for row in rows], list(notes))


def interval_heading(spans: Iterable[Span | None], fmt: Format, sep: str = "-") -> tuple[str, Format]:
    """(header, format) of an interval column named for what it holds: '95% CI' or 'range' when every interval is
    of that kind (bare cells), else 'interval' with each cell labelled."""
    kinds = {s.kind for s in spans if s}
    if len(kinds) == 1 and None not in kinds:
        return INTERVAL_LABELS.get(next(iter(kinds)) or "", "interval"), span_of(fmt, sep)
    return "interval", span_of(fmt, sep, labelled=True)


def batch_label(text: str) -> str:
    """A shared batch column folded into a title: 'batch 128'."""
    return f"batch {text}"


def devices_label(text: str) -> str:
    """A shared devices column folded into a title: '1 device', '8 devices'."""
    return plural(int(text), "device") if text.isdigit() else f"devices {text}"


class Cell(Protocol):
    """A summary row of one group (GroupRow, RunRow) as a label reads it."""

    @property
    def engine(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def batch_per_device(self) -> int | None: ...
    @property
    def devices(self) -> int | None: ...


def group_label(row: Cell, with_batch: bool = False) -> str:
    """A group as a short label: 'jax tf32', with the path and devices when not the usual optimized on one device, and
    the batch ('jax tf32 b64') when ``with_batch`` (a table of several batches, whose groups it alone tells apart)."""
    extra = [] if row.path in (None, "optimized") else [str(row.path)]
    extra += [f"b{row.batch_per_device}"] if with_batch else []
    extra += [] if row.devices in (None, 1) else [f"x{row.devices}"]
    return " ".join([str(row.engine), str(row.precision), *extra])


def grouped_notes(pairs: Iterable[tuple[str, str | None]], noun: str, listed: int = 3) -> list[str]:
    """One line per distinct note of (label, note) pairs, in first-seen order: 'jax bf16: <note>', 'jax bf16, pytorch
    tf32: <note>' for one shared by up to ``listed`` labels, '(6 <noun>s): <note>' beyond."""
    labels: dict[str, list[str]] = {}
    for label, note in pairs:
        if note:
            labels.setdefault(note, []).append(label)
    return [f"{', '.join(names) if len(names) <= listed else '(' + plural(len(names), noun) + ')'}: {note}"
            for note, names in labels.items()]


def footnotes(pairs: Iterable[tuple[str, str | None]], heading: str) -> list[str]:
    """Notes under a table (:func:`grouped_notes` of groups), each led by ``heading`` ('warning jax tf32: ...')."""
    return [f"{heading} {line}" for line in grouped_notes(pairs, "group")]
