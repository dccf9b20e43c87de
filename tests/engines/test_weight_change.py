"""How far training moved the weights: the distance, and OpenNN's reading of it from its buffer dumps."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from bench_engine.weights import WeightChange, weight_change
from tests.conftest import REPO


def test_distance_is_over_every_value_and_relative_to_the_start() -> None:
    start = [np.array([3.0, 0.0]), np.array([[0.0], [4.0]])]
    end = [np.array([3.0, 1.0]), np.array([[0.0], [4.0]])]
    found = weight_change(start, end)
    assert found == WeightChange(l2=1.0, relative=1.0 / 5.0, values=4)
    assert weight_change(start, start).l2 == 0.0


def test_fewer_updates_move_less() -> None:
    rng = np.random.default_rng(0)
    start = rng.normal(size=1000)
    steps = rng.normal(size=(780, 1000)) * 1e-3 + 1e-4  # a drift and noise, as Adam's updates
    half = weight_change([start], [start + steps[:381].sum(0)])
    full = weight_change([start], [start + steps.sum(0)])
    assert half.relative < 0.6 * full.relative


def test_mismatched_or_non_finite_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="shapes"):
        weight_change([np.zeros(2)], [np.zeros(3)])
    with pytest.raises(ValueError):
        weight_change([np.zeros(2)], [np.zeros(2), np.zeros(2)])
    with pytest.raises(ValueError, match="finite"):
        weight_change([np.ones(2)], [np.array([1.0, math.nan])])


def test_opennn_reads_the_parameter_slots_of_its_dumps(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "images" / "opennn"))
    from bench_opennn.sharedinit import moved_weights

    layout = [("param", "stem_conv", 0, 0, (2, 2)), ("param", "classifier", 0, 16, (3,)), ("state", "stem_conv", 0, 0, (2,))]
    before = np.zeros(32, dtype="<f4")
    before[:4], before[16:19] = 1.0, 2.0
    after = before.copy()
    after[0] += 0.5
    after[25] = 99.0  # alignment padding: never a parameter, never counted
    keys = {"dump_params": tmp_path / "a.f32", "final_params": tmp_path / "b.f32"}
    before.tofile(keys["dump_params"])
    after.tofile(keys["final_params"])
    found = moved_weights(layout, keys)
    assert found.values == 7 and found.l2 == pytest.approx(0.5) and found.relative == pytest.approx(0.5 / math.sqrt(4 + 12))
