"""Statistics of repeated measurements (scipy): median, spread, bootstrap confidence intervals."""

from __future__ import annotations

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


def sample_summary(values: list[float], seed: int = 0) -> dict[str, Any] | None:
    """median, mean, min, max, IQR, relative spread and a bootstrap 95% CI of the median."""
    if not values:
        return None
    arr = np.asarray(values, dtype=float)
    q1, median, q3 = np.percentile(arr, [25, 50, 75])
    out: dict[str, Any] = {
        "n": int(arr.size),
        "median": float(median),
        "mean": float(arr.mean()),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "iqr": float(q3 - q1),
        "q1": float(q1),
        "q3": float(q3),
        "stdev": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        "ci95": None,
    }
    out["rel_spread"] = float((arr.max() - arr.min()) / median) if median else 0.0
    out["interval"] = {"kind": interval_kind(arr.size), "low": float(arr.min()), "high": float(arr.max())}
    if arr.size >= MIN_CI_REPEATS and np.ptp(arr) > 0:
        from scipy import stats

        res = stats.bootstrap((arr,), np.median, confidence_level=0.95, n_resamples=BOOTSTRAP_RESAMPLES,
                              method="percentile", random_state=np.random.default_rng(seed))
        out["ci95"] = [float(res.confidence_interval.low), float(res.confidence_interval.high)]
    elif arr.size >= MIN_CI_REPEATS:
        out["ci95"] = [float(median), float(median)]
    if out["ci95"] is not None:
        out["interval"].update(low=out["ci95"][0], high=out["ci95"][1])
    return out


def ratio_of_medians(a: list[float], b: list[float], seed: int = 0) -> tuple[float, list[float] | None]:
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
            return ratio, [float(low), float(high)]
    return ratio, None


def ratio_range(a: list[float], b: list[float]) -> list[float]:
    """The range of a/b over the repeats: [min(a)/max(b), max(a)/min(b)] (what few repeats can say)."""
    return [float(min(a) / max(b)), float(max(a) / min(b))]


def mann_whitney(a: list[float], b: list[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value, or None with fewer than 2 repeats a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy import stats

    return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def relative_spread(values: list[float]) -> float | None:
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


def significance(a: list[float], b: list[float], alpha: float = ALPHA) -> dict[str, Any]:
    """Mann-Whitney U test of a vs b: {'p_value', 'significant' (None with <2 repeats a side), 'note'}."""
    p = mann_whitney(a, b)
    if p is None:
        return {"p_value": None, "significant": None, "note": f"n/a: needs 2+ repeats a side (have {len(a)} and {len(b)})"}
    out: dict[str, Any] = {"p_value": p, "significant": bool(p < alpha), "note": None}
    floor = min_attainable_p(len(a), len(b))
    if floor >= alpha:
        out["note"] = (f"{len(a)} x {len(b)} repeats cannot reach p<{alpha:g} (smallest possible p = {floor:.3f});"
                       " use 4+ repeats a side")
    return out


def compare_samples(a: list[float], b: list[float], seed: int = 0, alpha: float = ALPHA) -> dict[str, Any]:
    """B relative to A: ratio median(b)/median(a) with its bootstrap 95% CI, and the Mann-Whitney verdict."""
    ratio, ci = ratio_of_medians(b, a, seed=seed)
    return {"ratio": ratio, "ci95": ci, "range": ratio_range(b, a), "interval": interval_kind(min(len(a), len(b))),
            **significance(a, b, alpha)}
