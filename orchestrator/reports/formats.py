"""How a typed table cell reads as text: the one set of number formats of every table (terminal, Markdown, HTML).

A format is a function of one cell (None, a number, a string, a :class:`Span` ...) to its text; the factories
below make the usual ones. CSV ignores them and writes the cells as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from orchestrator.judge.stats import SampleSummary

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
    def labelled(cls, stats: SampleSummary | None) -> Span | None:
        """The interval of a statistics block (orchestrator.judge.stats), labelled by its kind, or None."""
        block = stats.interval if stats else None
        return cls(block.low, block.high, block.kind) if block else None


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


def significant_text(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, never rounded to zero: 18.49 -> '18.5', 0.0065 -> '0.0065',
    36945.4 -> '36,945', 0.00001234 -> '1.23e-05' (below 0.001); trailing zeros after the point dropped."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    if abs(value) < 1e-3:
        return f"{value:.{digits - 1}e}"
    decimals = max(0, digits - 1 - magnitude)
    written = f"{value:,.{decimals}f}"
    return written.rstrip("0").rstrip(".") if "." in written else written


def significant(digits: int = 3, suffix: str = "", scale: float = 1, missing: str = DASH) -> Format:
    """A number (times ``scale``) to ``digits`` significant digits (:func:`significant_text`) + ``suffix``; None as ``missing``."""

    def render(value: Any) -> str:
        return missing if value is None else significant_text(value * scale, digits) + suffix

    return render


def span_of(fmt: Format, sep: str = "-", labelled: bool = False) -> Format:
    """A :class:`Span` as 'low<sep>high', both ends through ``fmt``, labelled ('95% CI ', 'range ') when ``labelled``; None as '-'."""

    def render(value: Span | None) -> str:
        if not value:
            return DASH
        label = INTERVAL_LABELS.get(value.kind, "") + " " if labelled and value.kind else ""
        return f"{label}{fmt(value.low)}{sep}{fmt(value.high)}"

    return render


INTERVAL_LABELS = {"ci95": "95% CI", "range": "range"}


def plural(count: int, word: str, many: str | None = None) -> str:
    """'1 epoch', '2 epochs' ('1 device', '8 devices'); ``many`` for an irregular plural."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


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


def compact_rate(value: Any) -> str:
    """samples/s in a compact table: whole numbers from 100 up ('36,945'), 3 significant digits below ('12.3'); None as '-'."""
    if value is None:
        return DASH
    return f"{value:,.0f}" if abs(value) >= 100 else significant_text(value, 3)


def compact_rate_or_apparent(value: Any) -> str:
    """:func:`compact_rate`, an invalid run's :class:`Apparent` figure in parentheses ('(74,128)'; the table's note says why)."""
    return f"({compact_rate(value.throughput)})" if isinstance(value, Apparent) else compact_rate(value)


RELATIVE = number(".4g")  # relative weight change
