"""How far training moved the weights: a read-back signal of the work done, independent of any counter.

An engine that counts N optimizer updates but computes fewer moves its weights less far from the
initial ones than an honest run of the same protocol does. ``weight_change`` is the L2 distance
between the trainable parameters read back after the last step and those read back after loading,
absolute and relative to the initial norm (``work.weight_change`` of the engine result).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WeightChange:
    """``||w_end - w_0||_2`` and that over ``||w_0||_2`` (float64 sums over every trainable value)."""

    l2: float
    relative: float
    values: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.l2) and math.isfinite(self.relative)) or self.l2 < 0 or self.values < 1:
            raise ValueError(f"weight change: not a finite distance over at least one value ({self})")

    def to_json(self) -> dict[str, float | int]:
        return {"l2": self.l2, "relative": self.relative, "values": self.values}


def weight_change(initial: Iterable[np.ndarray], final: Iterable[np.ndarray]) -> WeightChange:
    """The distance between two equally shaped sequences of parameter arrays."""
    moved = start = 0.0
    values = 0
    for before, after in zip(initial, final, strict=True):
        a, b = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
        if a.shape != b.shape:
            raise ValueError(f"weight change: shapes differ ({a.shape} vs {b.shape})")
        moved += float(np.sum((b - a) ** 2))
        start += float(np.sum(a**2))
        values += a.size
    l2 = math.sqrt(moved)
    return WeightChange(l2=l2, relative=l2 / math.sqrt(start) if start > 0 else math.inf, values=values)
