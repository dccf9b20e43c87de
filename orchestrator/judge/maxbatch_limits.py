"""Whether an artifact's maximal batches are comparable: each search found the largest batch that fits within
its allocator's limit (``memory_limit_bytes`` of its probes' results), so two engines' maximal batches speak for
the models only when those limits are alike. JAX's default share of a GPU is 75%, PyTorch's the whole device:
left so, a maximal-batch comparison measures the allocators' settings, not the frameworks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LIMIT_SPREAD_PERCENT = 10  # limits further apart than this (largest over smallest) make the maximal batches incomparable


@dataclass(frozen=True)
class SearchLimit:
    """One search's cell and the allocator limit its probes ran under (None where its results report none)."""

    label: str
    limit_bytes: int | None

    @classmethod
    def of(cls, search: Mapping[str, Any]) -> SearchLimit:
        """The limit of a ``maxbatch/*/search.json`` document (one from before the field has none)."""
        label = f"{search['engine']} {search['precision']} {search['path']} d{search['devices']}"
        return cls(label, search.get("memory_limit_bytes"))


def limit_warnings(searches: Sequence[SearchLimit]) -> list[str]:
    """One warning when the searches' known limits are more than :data:`LIMIT_SPREAD_PERCENT` apart, naming the smallest
    and the largest; none with fewer than two known limits."""
    known = [s for s in searches if s.limit_bytes is not None]
    if len(known) < 2:
        return []
    low = min(known, key=lambda s: s.limit_bytes or 0)
    high = max(known, key=lambda s: s.limit_bytes or 0)
    assert low.limit_bytes is not None and high.limit_bytes is not None
    if high.limit_bytes * 100 <= low.limit_bytes * (100 + LIMIT_SPREAD_PERCENT):  # in integers: exactly 10% is alike
        return []
    spread = high.limit_bytes / low.limit_bytes - 1 if low.limit_bytes else float("inf")
    return [f"maximal batches not comparable: {low.label} searched within {_gib(low.limit_bytes)}, {high.label} within "
            f"{_gib(high.limit_bytes)} ({spread:.0%} more; at most {LIMIT_SPREAD_PERCENT}% apart): give every engine the "
            "same share of the device (JAX: option memory_fraction)"]


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"
