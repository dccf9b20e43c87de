"""Statistics on known samples: median, IQR, bootstrap CI, Mann-Whitney U, ratios, relative spread."""

from __future__ import annotations

import pytest

from orchestrator.judge.stats import compare_samples, mann_whitney, min_attainable_p, ratio_of_medians, relative_spread, sample_summary, significance


def test_describe_known_sample() -> None:
    d = sample_summary([5.0, 1.0, 4.0, 2.0, 3.0])
    assert d.n == 5
    assert d.median == 3.0 and d.mean == 3.0
    assert (d.min, d.max) == (1.0, 5.0)
    assert (d.q1, d.q3, d.iqr) == (2.0, 4.0, 2.0)
    assert d.stdev == pytest.approx(1.5811388, rel=1e-6)
    low, high = d.ci95
    assert 1.0 <= low <= 3.0 <= high <= 5.0
    assert sample_summary([5.0, 1.0, 4.0, 2.0, 3.0]) == d  # seeded: reproducible


def test_describe_edge_cases() -> None:
    assert sample_summary([]) is None
    one = sample_summary([7.0])
    assert one.median == 7.0 and one.ci95 is None and one.stdev == 0.0
    three = sample_summary([2.0, 2.0, 3.0])  # fewer than 5 repeats: the range, labelled so, no "95% CI"
    assert three.ci95 is None and three.interval.to_json() == {"kind": "range", "low": 2.0, "high": 3.0}
    assert sample_summary([2.0] * 5).ci95 == (2.0, 2.0)


def test_bootstrap_ci_narrows_with_tight_data() -> None:
    tight = sample_summary([100.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3])
    assert tight.ci95[0] >= 99.5 and tight.ci95[1] <= 100.5
    assert relative_spread([100.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3]) < 0.01


def test_relative_spread() -> None:
    assert relative_spread([100.0, 150.0, 80.0, 120.0]) == pytest.approx((127.5 - 95.0) / 110.0)  # 4+ values: the IQR
    assert relative_spread([100.0, 150.0, 80.0]) == pytest.approx(70.0 / 100.0)  # fewer: the range
    assert relative_spread([100.0]) is None and relative_spread([0.0, 0.0]) is None


def test_mann_whitney_clearly_different() -> None:
    a = [100.0, 101.0, 99.0, 100.5, 99.5]
    b = [150.0, 151.0, 149.0, 150.5, 149.5]
    p = mann_whitney(a, b)
    assert p == pytest.approx(2 / 252)  # exact two-sided: the most extreme of C(10,5) orderings, both tails
    verdict = significance(a, b)
    assert verdict.significant is True and verdict.note is None


def test_mann_whitney_same_distribution_and_too_few() -> None:
    assert mann_whitney([1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 3.5, 4.5]) > 0.5
    assert mann_whitney([1.0], [2.0, 3.0]) is None
    verdict = significance([1.0], [2.0, 3.0])
    assert verdict.significant is None and verdict.note.startswith("n/a")


def test_min_attainable_p() -> None:
    assert min_attainable_p(3, 3) == pytest.approx(0.1)
    assert min_attainable_p(4, 4) == pytest.approx(2 / 70)
    note = significance([1.0, 2.0, 3.0], [10.0, 11.0, 12.0]).note
    assert "cannot reach" in note


def test_ratio_and_direction() -> None:
    ratio, ci = ratio_of_medians([200.0, 202.0, 198.0], [100.0, 101.0, 99.0])
    assert ratio == pytest.approx(2.0) and ci is None  # 3 repeats a side: no bootstrap "95% CI"
    ratio, ci = ratio_of_medians([200.0, 202.0, 198.0, 201.0, 199.0], [100.0, 101.0, 99.0, 100.5, 99.5])
    assert ci[0] <= 2.0 <= ci[1]
    assert ratio_of_medians([2.0, 4.0], [1.0, 1.0]) == (3.0, None)
    result = compare_samples([100.0, 100.0, 101.0, 99.0], [50.0, 51.0, 49.0, 50.0])  # B relative to A
    assert result.ratio == pytest.approx(0.5)
    assert result.test.significant is True
