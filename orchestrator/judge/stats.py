"""Statistics of repeated measurements (scipy): median, spread, bootstrap confidence intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# scipy.stats is imported where it is used: importing it costs about 1 s, paid by every `bench`
# command otherwise (part of the per-run time outside the engine), needed only for repeats

ALPHA = 0.05  # significance level of the Mann-Whitney U test
SPREAD_IQR_REPEATS = 4  # from this many repeats the spread is the IQR; below, the range (min-max)
BOOTSTRAP_RESAMPLES = 2000
MIN_CI_REPEATS = 5  # below this a bootstrap "95% CI" of a median is not one: the interval shown is the range


def interval_kind(n: int) -> str:
    """'ci95' (bootstrap interval of the median) with 5+ repeats, else 'range' (min-max)."""
    return "ci95" if n >= MIN_CI_REPEATS else "range"


@dataclass(frozen=True)
class Interval:
    """The interval a statistics block shows: ``kind`` 'ci95' (bootstrap 95% CI of the median) or 'range' (min-max)."""

    kind: str
    low: float
    high: float

    def __post_init__(self) -> None:
        if self.kind not in ("ci95", "range"):
            raise ValueError(f"interval kind {self.kind!r} is neither ci95 nor range")
        if self.low > self.high:
            raise ValueError(f"interval low {self.low} above high {self.high}")

    def to_json(self) -> dict[str, str | float]:
        return {"kind": self.kind, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class SampleSummary:
    """Statistics of repeated measurements: median, mean, extremes, quartiles, spread and the interval shown."""

    n: int
    median: float
    mean: float
    min: float
    max: float
    iqr: float
    q1: float
    q3: float
    stdev: float
    ci95: tuple[float, float] | None = None
    rel_spread: float | None = None
    interval: Interval | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError("statistics of no value")
        if not self.min <= self.median <= self.max:
            raise ValueError(f"median {self.median} outside [{self.min}, {self.max}]")
        if self.ci95 is not None and len(self.ci95) != 2:
            raise ValueError("ci95 is a (low, high) pair")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SampleSummary:
        interval = doc.get("interval")
        return cls(doc["n"], doc["median"], doc["mean"], doc["min"], doc["max"], doc["iqr"], doc["q1"], doc["q3"], doc["stdev"],
                   tuple(doc["ci95"]) if doc.get("ci95") is not None else None, doc.get("rel_spread"),  # type: ignore[arg-type]
                   Interval(interval["kind"], interval["low"], interval["high"]) if interval else None)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"n": self.n, "median": self.median, "mean": self.mean, "min": self.min, "max": self.max,
                               "iqr": self.iqr, "q1": self.q1, "q3": self.q3, "stdev": self.stdev,
                               "ci95": list(self.ci95) if self.ci95 is not None else None}
        if self.rel_spread is not None:
            doc["rel_spread"] = self.rel_spread
        if self.interval is not None:
            doc["interval"] = self.interval.to_json()
        return doc


def sample_summary(values: Sequence[float], seed: int = 0) -> SampleSummary | None:
    """median, mean, min, max, IQR, relative spread and a bootstrap 95% CI of the median."""
    if not values:
        return None
    arr = np.asarray(values, dtype=float)
    q1, median, q3 = np.percentile(arr, [25, 50, 75])
    ci95 = _median_ci(arr, float(median), seed)
    low, high = ci95 if ci95 is not None else (float(arr.min()), float(arr.max()))
    return SampleSummary(
        n=int(arr.size), median=float(median), mean=float(arr.mean()), min=float(arr.min()), max=float(arr.max()),
        iqr=float(q3 - q1), q1=float(q1), q3=float(q3), stdev=float(arr.std(ddof=1)) if arr.size > 1 else 0.0, ci95=ci95,
        rel_spread=float((arr.max() - arr.min()) / median) if median else 0.0, interval=Interval(interval_kind(arr.size), low, high),
    )


def _median_ci(arr: np.ndarray, median: float, seed: int) -> tuple[float, float] | None:
    """The bootstrap 95% CI of the median with 5+ values (the median itself when they are all equal), else None."""
    if arr.size < MIN_CI_REPEATS:
        return None
    if np.ptp(arr) == 0:
        return (median, median)
    from scipy import stats

    res = stats.bootstrap((arr,), np.median, confidence_level=0.95, n_resamples=BOOTSTRAP_RESAMPLES,
                          method="percentile", random_state=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def ratio_of_medians(a: Sequence[float], b: Sequence[float], seed: int = 0) -> tuple[float, tuple[float, float] | None]:
    """median(a)/median(b) with a bootstrap 95% CI when both sides have 5+ repeats (see ratio_range otherwise)."""
    ratio = float(np.median(a) / np.median(b))
    if len(a) >= MIN_CI_REPEATS and len(b) >= MIN_CI_REPEATS:
        from scipy import stats

        res = stats.bootstrap(
            (np.asarray(a, float), np.asarray(b, float)),
            lambda x, y, axis=-1: np.median(x, axis=axis) / np.median(y, axis=axis),
            vectorized=True, paired=False, confidence_level=0.95, n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile", random_state=np.random.default_rng(seed),
        )
        low, high = res.confidence_interval
        if np.isfinite(low) and np.isfinite(high):
            return ratio, (float(low), float(high))
    return ratio, None


def ratio_range(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """The range of a/b over the repeats: (min(a)/max(b), max(a)/min(b)) (what few repeats can say)."""
    return (float(min(a) / max(b)), float(max(a) / min(b)))


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value, or None with fewer than 2 repeats a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy import stats

    return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def relative_spread(values: Sequence[float]) -> float | None:
    """The spread of repeated measurements relative to their median: the IQR with 4+ values, else the range
    (None with fewer than 2 values or a zero median). orchestrator.judge.trust warns when it is high."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=float)
    q1, median, q3 = np.percentile(arr, [25, 50, 75])
    if not median:
        return None
    return float((q3 - q1) / median if arr.size >= SPREAD_IQR_REPEATS else np.ptp(arr) / median)


def min_attainable_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided exact Mann-Whitney p-value n_a x n_b repeats can give (no ties)."""
    from math import comb

    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2.0 / comb(n_a + n_b, n_a))


@dataclass(frozen=True)
class Significance:
    """A two-sided Mann-Whitney U test: its p-value, the verdict (None with fewer than 2 repeats a side), a note."""

    p_value: float | None
    significant: bool | None
    note: str | None = None

    def __post_init__(self) -> None:
        if (self.p_value is None) != (self.significant is None):
            raise ValueError("a test without a p-value has no verdict, and one with a p-value has one")


def significance(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> Significance:
    """Mann-Whitney U test of a vs b."""
    p = mann_whitney(a, b)
    if p is None:
        return Significance(None, None, f"n/a: needs 2+ repeats a side (have {len(a)} and {len(b)})")
    floor = min_attainable_p(len(a), len(b))
    note = None
    if floor >= alpha:
        note = (f"{len(a)} x {len(b)} repeats cannot reach p<{alpha:g} (smallest possible p = {floor:.3f});"
                " use 4+ repeats a side")
    return Significance(p, bool(p < alpha), note)


@dataclass(frozen=True)
class SampleComparison:
    """B relative to A: median(B)/median(A), its interval (bootstrap CI with 5+ repeats a side, else the range) and the test."""

    ratio: float
    ci95: tuple[float, float] | None
    range: tuple[float, float]
    interval: str
    test: Significance


def compare_samples(a: Sequence[float], b: Sequence[float], seed: int = 0, alpha: float = ALPHA) -> SampleComparison:
    """B relative to A: ratio median(b)/median(a) with its bootstrap 95% CI, and the Mann-Whitney verdict."""
    ratio, ci = ratio_of_medians(b, a, seed=seed)
    return SampleComparison(ratio, ci, ratio_range(b, a), interval_kind(min(len(a), len(b))), significance(a, b, alpha))
