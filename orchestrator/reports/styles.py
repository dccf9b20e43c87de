"""The look of a report's plots, defined once: one colour per engine (the same in every plot, and for the engines
bench ships, in every report) and one line style per precision."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD")
ENGINE_COLOURS = {"jax": PALETTE[0], "tensorflow": PALETTE[1], "opennn": PALETTE[2], "pytorch": PALETTE[3]}
PRECISION_ORDER = ("fp32", "tf32", "bf16", "fp16", "fp8")
LINESTYLES = ("-", "--", ":", "-.")
NEUTRAL = "#8C8C8C"  # reference lines (linear scaling)


@dataclass(frozen=True)
class Styles:
    """engine -> colour and precision -> line style of one report."""

    colours: dict[str, str]
    linestyles: dict[str, str]

    def colour(self, engine: str) -> str:
        return self.colours[engine]

    def linestyle(self, precision: str) -> str:
        return self.linestyles[precision]


def engine_colours(engines: Iterable[str]) -> dict[str, str]:
    """The shipped engines keep their colour; any other takes the next free one, in name order."""
    names = sorted(set(engines))
    free = [c for c in PALETTE if c not in ENGINE_COLOURS.values()]
    others = [e for e in names if e not in ENGINE_COLOURS]
    return {e: ENGINE_COLOURS.get(e) or free[others.index(e) % len(free)] for e in names}


def precision_linestyles(precisions: Iterable[str]) -> dict[str, str]:
    """Line styles in precision order (fp32, tf32, bf16, fp16, fp8, then any other by name): the first solid."""
    ordered = sorted(set(precisions), key=lambda p: (PRECISION_ORDER.index(p) if p in PRECISION_ORDER else len(PRECISION_ORDER), p))
    return {p: LINESTYLES[i % len(LINESTYLES)] for i, p in enumerate(ordered)}


def styles_for(engines: Iterable[str], precisions: Iterable[str]) -> Styles:
    return Styles(engine_colours(engines), precision_linestyles(precisions))
