"""Whether an artifact's maximal batches are comparable: each search found the largest batch that fits within
its allocator's limit (``memory_limit_bytes`` of its probes' results), so two engines' maximal batches speak for
the models only when those limits are alike. JAX's default share of a GPU is 75%, PyTorch's the whole device:
left so, a maximal-batch comparison measures the allocators' settings, not the frameworks. Where an engine's results
report no limit (TensorFlow, OpenNN, or a search from before the field), whether its maximal batch compares with
another engine's is unknown, and the warning says so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LIMIT_SPREAD_PERCENT = 10  # limits further apart than this (largest over smallest) make the maximal batches incomparable


@dataclass(frozen=True)
class SearchLimit:
    """One search's engine, its cell and the allocator limit its probes ran under (None where its results report none)."""

    engine: str
    label: str
    limit_bytes: int | None

    @classmethod
    def of(cls, search: Mapping[str, Any]) -> SearchLimit:
        """The limit of a ``maxbatch/*/search.json`` document (one from before the field has none)."""
        label = f"{search['engine']} {search['precision']} {search['path']} d{search['devices']}"
        return cls(search["engine"], label, search.get("memory_limit_bytes"))


def limit_warnings(searches: Sequence[SearchLimit]) -> list[str]:
    """The warnings on comparing these searches' maximal batches across engines: one naming the searches whose limit is
    unknown (with more than one engine searched), one when the known limits are more than :data:`LIMIT_SPREAD_PERCENT`
    apart, naming the smallest and the largest."""
    return [w for w in (unknown_limits(searches), limits_apart(searches)) if w]


def unknown_limits(searches: Sequence[SearchLimit]) -> str | None:
    unknown = [s.label for s in searches if s.limit_bytes is None]
    if not unknown or len({s.engine for s in searches}) < 2:  # one engine's precisions share its allocator
        return None
    return (f"maximal batches not judged comparable: {', '.join(unknown)} reported no allocator limit "
            "(measurements.memory_limit_bytes), so whether each engine searched within the same share of the device "
            "is unknown")


def limits_apart(searches: Sequence[SearchLimit]) -> str | None:
    known = [s for s in searches if s.limit_bytes is not None]
    if len(known) < 2:
        return None
    low = min(known, key=lambda s: s.limit_bytes or 0)
    high = max(known, key=lambda s: s.limit_bytes or 0)
    assert low.limit_bytes is not None and high.limit_bytes is not None
    if high.limit_bytes * 100 <= low.limit_bytes * (100 + LIMIT_SPREAD_PERCENT):  # in integers: exactly 10% is alike
        return None
    spread = high.limit_bytes / low.limit_bytes - 1 if low.limit_bytes else float("inf")
    return (f"maximal batches not comparable: {low.label} searched within {_gib(low.limit_bytes)}, {high.label} within "
            f"{_gib(high.limit_bytes)} ({spread:.0%} more; at most {LIMIT_SPREAD_PERCENT}% apart): give every engine the "
            "same share of the device (JAX: option memory_fraction)")


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"
