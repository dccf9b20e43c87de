"""Where a maximal-batch search grows next, from the device memory its probes reported.

A probe that fits reports its peak device memory and its allocator's limit (``measurements.peak_memory_bytes``,
``memory_limit_bytes``). A line through the fitting probes' peaks (through the origin while there is one) says
at which batch the peak would reach the limit: the predicted maximum. Growing by doubling past it probes a batch
that only runs out of memory, and a large one costs most (a JAX TResNet-M probe compiled for 205.6 s at 2,048 on
an H200 and for more than 480 s at 4,096, issue 26), so the search grows to the first multiple of its granularity
above the predicted maximum where that is below the doubled batch: the out-of-memory probe that closes the
bracket is then just above the maximum, and the bisection starts from a narrow bracket. Its first probe is the
predicted maximum rounded down to the granularity, where that lies inside the bracket: an exact prediction (XLA's
buffers are planned before the run) closes the search with that one probe instead of a bisection's log2(bracket /
granularity), and a wrong one costs one probe, after which the bisection takes midpoints. The prediction only
picks a batch to probe; every outcome is still a real probe's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from scipy import stats

MIN_STEP_SHARE = 8  # a guided step grows the batch by at least 1/8 (and one granularity): a prediction below the
#                     batch that fits cannot make the search creep


class MemoryPoint(NamedTuple):
    """A fitting probe: its batch and the peak device memory it reported."""

    batch: int
    peak_bytes: int


def predicted_max(points: Sequence[MemoryPoint], limit_bytes: int | None) -> float | None:
    """The batch at which the peak reaches ``limit_bytes`` on the line through ``points`` (least squares; through
    the origin for one batch); None without points or limit, or for a line that does not grow with the batch."""
    if not points or limit_bytes is None:
        return None
    batches = sorted({p.batch for p in points})
    if len(batches) == 1:
        slope = max(p.peak_bytes for p in points) / batches[0]
        intercept = 0.0
    else:
        fit = stats.linregress([p.batch for p in points], [p.peak_bytes for p in points])
        slope, intercept = float(fit.slope), float(fit.intercept)
    if slope <= 0:
        return None
    return (limit_bytes - intercept) / slope


def next_growth(batch: int, limit: int, granularity: int, predicted: float | None) -> int:
    """The batch the growth phase probes after ``batch`` fitted: doubled (at most ``limit``), or, where that is
    smaller, the first multiple of ``granularity`` above the ``predicted`` maximum (at least ``batch`` plus an
    eighth of it, rounded up to the granularity)."""
    doubled = min(batch * 2, limit)
    if predicted is None:
        return doubled
    above = (int(predicted) // granularity + 1) * granularity
    least = batch + -(-max(granularity, batch // MIN_STEP_SHARE) // granularity) * granularity
    return min(doubled, max(above, least))


def bisection_guess(fits: int, fails: int, granularity: int, predicted: float | None) -> int | None:
    """The bisection's first probe between ``fits`` and ``fails``: the ``predicted`` maximum rounded down to
    ``granularity``, where that lies strictly inside the bracket; None (a midpoint) otherwise."""
    if predicted is None:
        return None
    guess = int(predicted) // granularity * granularity
    return guess if fits < guess < fails else None
