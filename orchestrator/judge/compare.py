"""Compare two artifacts: per matching group, B's steady-state throughput relative to A's.

A group is one engine x precision x path x batch per device x devices. For every group present in both
artifacts: ``ratio = median(B) / median(A)`` of the valid repeats' steady-state throughput (above 1: B is
faster), its bootstrap 95% interval (3+ repeats a side), and a two-sided Mann-Whitney U test over the
repeats (significant when p < alpha; ``n/a`` with fewer than 2 repeats a side). A change of the ratio
smaller than ``min_change_pct`` (pyperf's minimum speed) reads "no change", significant or not.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.judge.environment_diff import EnvironmentDiff
from orchestrator.judge.stats import ALPHA, SampleComparison, compare_samples
from orchestrator.judge.summary_model import GROUP_KEYS, Summary

DIRECTION = "ratio = median steady-state throughput of B / median of A; above 1 means B is faster (samples/s)"
MIN_CHANGE_PCT = 2.0  # default minimum effect: a smaller change of the median throughput is "no change"
NO_CHANGE = "no change"


def parse_percent(text: str, option: str = "--min-change") -> float:
    """'2%', '2' or '0.5 %' -> 2.0, 2.0, 0.5 (BadInput unless 0 <= value < 100)."""
    raw = text.strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{option} {text!r}: not a percentage (e.g. 2% or 0.5)") from None
    if not 0.0 <= value < 100.0:
        raise BadInput(f"{option} {text!r}: must be at least 0% and below 100%")
    return value


Key = tuple[Any, ...]  # a group: engine, precision, path, batch per device, devices


def _groups(summary: Summary) -> tuple[dict[Key, list[float]], dict[Key, int]]:
    """Valid throughputs and number of runs (skipped excluded) per group key."""
    values: dict[Key, list[float]] = defaultdict(list)
    counts: dict[Key, int] = defaultdict(int)
    for row in summary.runs:
        if row.status == "skipped":
            continue
        counts[row.group] += 1
        if row.status == "ok" and row.throughput:
            values[row.group].append(float(row.throughput))
    return values, counts


@dataclass(frozen=True)
class Side:
    """One of the two artifacts compared: where it is, what it ran, on which host and GPUs."""

    artifact: str
    scenario: str
    artifact_id: str
    smoke: bool
    hostname: str | None
    gpus: tuple[str | None, ...]

    @classmethod
    def of(cls, summary: Summary, label: str) -> Side:
        host = summary.host or {}
        gpus = tuple(g.get("name") for g in (host.get("nvml") or {}).get("gpus", []))
        return cls(label, summary.scenario, summary.artifact_id, summary.smoke, host.get("hostname"), gpus)

    def to_json(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "scenario": self.scenario, "artifact_id": self.artifact_id, "smoke": self.smoke,
                "hostname": self.hostname, "gpus": list(self.gpus)}


@dataclass(frozen=True)
class GroupChange:
    """One group present in both artifacts: B's throughput relative to A's and the verdict."""

    key: Key
    n_a: int
    n_b: int
    runs_a: int
    runs_b: int
    verdict: str
    comparison: SampleComparison | None = None  # None unless both sides have valid runs
    median_a: float | None = None
    median_b: float | None = None
    min_change_pct: float = MIN_CHANGE_PCT

    def __post_init__(self) -> None:
        if (self.comparison is None) != (self.n_a == 0 or self.n_b == 0):
            raise ValueError(f"group {self.key}: a comparison exactly when both sides have valid runs")

    @property
    def ratio(self) -> float | None:
        return self.comparison.ratio if self.comparison else None

    @property
    def change_pct(self) -> float | None:
        return (self.comparison.ratio - 1.0) * 100.0 if self.comparison else None

    @property
    def below_min_change(self) -> bool:
        return self.change_pct is not None and abs(self.change_pct) < self.min_change_pct

    def to_json(self) -> dict[str, Any]:
        c = self.comparison
        test = c.test if c else None
        doc: dict[str, Any] = dict(zip(GROUP_KEYS, self.key, strict=True))
        doc.update(n_a=self.n_a, n_b=self.n_b, runs_a=self.runs_a, runs_b=self.runs_b, median_a=self.median_a, median_b=self.median_b,
                   ratio=self.ratio, ci95=list(c.ci95) if c and c.ci95 else None, range=list(c.range) if c else None,
                   interval=c.interval if c else None, change_pct=self.change_pct, p_value=test.p_value if test else None,
                   significant=test.significant if test else None, note=test.note if test else None,
                   below_min_change=self.below_min_change, verdict=self.verdict)
        return doc


def _verdict(n_a: int, n_b: int, comparison: SampleComparison | None, min_change_pct: float) -> str:
    if comparison is None:
        return "n/a: no valid run in " + ("A" if n_a == 0 else "B")
    if abs(comparison.ratio - 1.0) * 100.0 < min_change_pct:
        return NO_CHANGE
    test = comparison.test
    if test.significant is None:
        return "n/a: needs 2+ repeats a side"
    if not test.significant:
        return "no significant difference" + (" (too few repeats to reach significance)" if test.note else "")
    return "B faster" if comparison.ratio > 1 else "B slower"


def _change(key: Key, xs: list[float], ys: list[float], runs: tuple[int, int], alpha: float, min_change_pct: float) -> GroupChange:
    """The change of one group from A's valid throughputs ``xs`` to B's ``ys``."""
    import numpy as np

    comparison = compare_samples(xs, ys, alpha=alpha) if xs and ys else None
    return GroupChange(key, len(xs), len(ys), *runs, verdict=_verdict(len(xs), len(ys), comparison, min_change_pct),
                       comparison=comparison, median_a=float(np.median(xs)) if comparison else None,
                       median_b=float(np.median(ys)) if comparison else None, min_change_pct=min_change_pct)


@dataclass(frozen=True)
class Comparison:
    """The comparison of two artifacts (what ``bench results compare --json`` prints)."""

    a: Side
    b: Side
    alpha: float
    min_change_pct: float
    groups: tuple[GroupChange, ...]
    only_in_a: tuple[tuple[Key, int], ...]  # (group, runs) of the groups only one side has
    only_in_b: tuple[tuple[Key, int], ...]
    warnings: tuple[str, ...] = ()
    environment: EnvironmentDiff | None = None

    def to_json(self) -> dict[str, Any]:
        def listing(groups: tuple[tuple[Key, int], ...]) -> list[dict[str, Any]]:
            return [{**dict(zip(GROUP_KEYS, key, strict=True)), "runs": runs} for key, runs in groups]

        return {
            "a": self.a.to_json(), "b": self.b.to_json(), "direction": DIRECTION, "alpha": self.alpha,
            "min_change_pct": self.min_change_pct,
            "verdicts": f"{NO_CHANGE}: |change| < {self.min_change_pct:g}% (significant or not); else B faster/slower when significant",
            "test": "two-sided Mann-Whitney U over the valid repeats; interval: bootstrap 95% (percentile) of the ratio with 5+ repeats "
                    "a side, else the range min(B)/max(A) .. max(B)/min(A)",
            "groups": [g.to_json() for g in self.groups], "only_in_a": listing(self.only_in_a), "only_in_b": listing(self.only_in_b),
            "warnings": list(self.warnings), "environment": self.environment.to_json() if self.environment else None,
        }


def compare_summaries(a: Summary, b: Summary, label_a: str = "A", label_b: str = "B", alpha: float = ALPHA,
                      min_change_pct: float = MIN_CHANGE_PCT, environment: EnvironmentDiff | None = None) -> Comparison:
    """B relative to A, group by group; ``environment``: the metadata diff of the two artifacts
    (orchestrator.judge.environment_diff.environment_diff), included as given."""
    values_a, counts_a = _groups(a)
    values_b, counts_b = _groups(b)
    rows = tuple(_change(key, values_a.get(key, []), values_b.get(key, []), (counts_a[key], counts_b[key]), alpha, min_change_pct)
                 for key in counts_a if key in counts_b)
    side_a, side_b = Side.of(a, label_a), Side.of(b, label_b)
    warnings = []
    if a.scenario != b.scenario:
        warnings.append(f"different scenarios: A is {a.scenario}, B is {b.scenario}")
    if a.smoke != b.smoke:
        warnings.append("one artifact is a --smoke run: its throughput is not comparable")
    if side_a.gpus != side_b.gpus:
        warnings.append(f"different GPUs: A {list(side_a.gpus) or 'none'}, B {list(side_b.gpus) or 'none'}")
    if not rows:
        warnings.append("no group is present in both artifacts")
    return Comparison(side_a, side_b, alpha, min_change_pct, rows,
                      tuple((k, n) for k, n in counts_a.items() if k not in counts_b),
                      tuple((k, n) for k, n in counts_b.items() if k not in counts_a), tuple(warnings), environment)
