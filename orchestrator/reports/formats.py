"""How a typed table cell reads as text: the one set of number formats of every table (terminal, Markdown, HTML).

A format is a function of one cell (None, a number, a string, a :class:`Span` ...) to its text; the factories
below make the usual ones. CSV ignores them and writes the cells as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

Format = Callable[[Any], str]
DASH = "-"


class Span(NamedTuple):
    """An interval; ``kind`` 'ci95' or 'range' labels it ('95% CI a - b', 'range a - b'), None leaves it bare."""

    low: float
    high: float
    kind: str | None = None

    @classmethod
    def of(cls, pair: Sequence[float] | None, kind: str | None = None) -> Span | None:
        """A [low, high] pair as a Span (None when absent or empty)."""
        return cls(pair[0], pair[1], kind) if pair else None

    @classmethod
    def labelled(cls, stats: dict[str, Any] | None) -> Span | None:
        """The ``interval`` block ({kind, low, high}) of a statistics block (orchestrator.stats), or None."""
        block = (stats or {}).get("interval")
        return cls(block["low"], block["high"], block["kind"]) if block else None


class Apparent(NamedTuple):
    """An invalid run's throughput as its engine counted it, and why it is not a measurement."""

    throughput: float
    why: str | None = None

    @classmethod
    def of(cls, throughput: float | None, why: str | None) -> Apparent | None:
        return cls(throughput, why) if throughput else None


def apparent(spec: str = ",.0f", suffix: str = "") -> Format:
    """An :class:`Apparent` as 'apparent 75,120, invalid: 381 of 780 updates'; None as '-'."""

    def render(value: Apparent | None) -> str:
        if not value:
            return DASH
        return f"apparent {value.throughput:{spec}}{suffix}, invalid" + (f": {value.why}" if value.why else "")

    return render


def text(value: Any) -> str:
    """The value as it is; None as '-'."""
    return DASH if value is None else str(value)


def blank(value: Any) -> str:
    """The value as it is; None as an empty cell."""
    return "" if value is None else str(value)


def number(spec: str, suffix: str = "", scale: float = 1, missing: str = DASH) -> Format:
    """``format(value * scale, spec) + suffix`` (e.g. ``number(',.1f')``, ``number('.1f', '%', 100)``); None as ``missing``."""

    def render(value: Any) -> str:
        if value is None:
            return missing
        return f"{(value * scale if scale != 1 else value):{spec}}{suffix}"

    return render


def span(spec: str = ",.1f", suffix: str = "", sep: str = " - ") -> Format:
    """A :class:`Span` as '[label ]low<sep>high', both ends formatted by ``spec`` + ``suffix``; None as '-'."""

    def render(value: Span | None) -> str:
        if not value:
            return DASH
        label = "" if value.kind is None else ("95% CI " if value.kind == "ci95" else "range ")
        return f"{label}{value.low:{spec}}{suffix}{sep}{value.high:{spec}}{suffix}"

    return render


def joined(sep: str, empty: str = "") -> Format:
    """A list as its items joined by ``sep``; an empty or missing list as ``empty``."""
    return lambda value: sep.join(map(str, value or [])) or empty


def of_total(pair: tuple[int, int]) -> str:
    """A (valid, total) pair as 'valid/total'."""
    return f"{pair[0]}/{pair[1]}"


def with_reason(template: str) -> Format:
    """A (verdict, reason) pair as the verdict, followed by ``template.format(reason)`` when there is a reason."""
    return lambda cell: cell[0] + (template.format(cell[1]) if cell[1] else "")


def flag(value: Any) -> str:
    """A device mode: 'on', 'off', or '-' when unknown."""
    return DASH if value is None else ("on" if value else "off")


RATE = number(",.1f")  # samples/s, watts, percentages of utilisation
SECONDS = number(".2f")
ENERGY = number(".4g")  # joules
TIMES = number(".2f", "x")  # ratios and speedups
PERCENT = number(".1f", "%", 100)  # a fraction as a percentage
PVALUE = number(".3g", missing="n/a")
APPARENT = apparent()  # invalid runs' counted samples/s


def rate_or_apparent(value: Any) -> str:
    """A valid run's samples/s, or an invalid run's :class:`Apparent` figure, in one column (the terminal)."""
    return APPARENT(value) if isinstance(value, Apparent) else RATE(value)
RELATIVE = number(".4g")  # relative weight change
