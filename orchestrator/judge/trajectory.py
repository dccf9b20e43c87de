"""Numerical parity: with the same initial weights, data order and updates, engines' losses agree.

Two comparisons per engine pair of a comparison cell (precision, path, per-device batch, devices)
whose runs started from the same shared weights (equal ``work.init.sha256``); each compares the
largest relative deviation ``|a - b| / max(|a|, |b|)`` with a tolerance:

- ``steps``: the loss of each of the first K steps (``measurements.losses``), where both runs have
  them (one-step blocks, or engines that record every step). Tolerance per step:
  ``min(cap, first * growth ** (step - 1))`` (:data:`STEP_TOLERANCE`). fp32 (and tf32) must agree to
  1e-3 on step 1, where only the summation order of identical math differs; later steps amplify
  those differences through the updates, so the bound doubles per step (measured on a CPU at 32x32,
  batch 32, from bench's shared weights whose residual branches start at zero: PyTorch, JAX and
  TensorFlow within 2.2e-3 over 5 SGD steps at lr 0.1 and 5e-5 over 5 Adam steps; README
  "Numerical parity"). bf16 rounds every activation to 8 bits of mantissa, hence the looser bound;
  it grows by 1.5 per step because bf16 rounding moves one engine's own trajectory that much
  (measured on the CPU smoke, SGD lr 0.1: JAX bf16 6.0% from JAX fp32 at step 4, PyTorch 2.5% at
  step 5; the engines' bf16 runs parted by up to 6.1% there).
- ``block_means``: the mean loss of every harness block over the whole run
  (``measurements.block_losses``, the same blocks for every engine, OpenNN included), against a
  constant tolerance per precision (:data:`BLOCK_MEAN_TOLERANCE`).

A pair out of tolerance does not invalidate its runs: the summary marks them ``parity_warning`` and
names the step or block and the deviation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

# precision -> (tolerance at step 1, growth per step, cap)
STEP_TOLERANCE: dict[str, tuple[float, float, float]] = {
    "fp32": (1e-3, 2.0, 5e-2),
    "tf32": (5e-3, 2.0, 1e-1),
    "bf16": (3e-2, 1.5, 2e-1),
    "fp16": (2e-2, 1.5, 2e-1),
}

BLOCK_MEAN_TOLERANCE: dict[str, float] = {
    "fp32": 2e-2,
    "tf32": 5e-2,
    "bf16": 1e-1,
    "fp16": 1e-1,
}
"""Largest relative deviation allowed between two engines' mean loss of one block, per precision.

Constant per block: a block mean averages the per-step rounding noise, and where the trajectories
part chaotically (long runs) the loss curves stay close in distribution, so the deviation of block
means saturates instead of growing like the per-step bound. The values are half the per-step caps of
:data:`STEP_TOLERANCE` (tf32 1e-1, bf16 and fp16 2e-1; fp32's 5e-2 rounded down to 2e-2) for the
averaging; a tenfold learning rate on one engine exceeds them within a few blocks on the CPU
(tests/engines/test_block_mean_parity.py).
Measured on an H200 at the seed protocol (scenarios/opennn_seed.yaml: 20 blocks, 780 Adam steps, OpenNN,
PyTorch and JAX from shared weights): largest deviations 4.6e-3..6.9e-3 at tf32 and 8.7e-3 at bf16, about a
tenth of these bounds; OpenNN's as-published runs (381 of 780 updates computed) sit 52% away. This table is
the one place they are read.
"""

STEPS, BLOCK_MEANS = "steps", "block_means"


def tolerance(precision: str, step: int) -> float:
    """The largest relative loss deviation allowed at ``step`` (1-based) of the per-step comparison."""
    first, growth, cap = STEP_TOLERANCE[precision]
    return min(cap, first * growth ** (step - 1))


def block_tolerance(precision: str, block: int) -> float:
    """The largest relative deviation allowed between block means (any block: the bound is constant)."""
    return BLOCK_MEAN_TOLERANCE[precision]


@dataclass(frozen=True)
class Deviation:
    """The outcome of comparing two loss series position by position."""

    compared: int  # positions compared (the common prefix)
    max_rel_dev: float
    at: int | None  # index of the largest deviation (0-based)
    tolerance: float | None  # the tolerance there
    first_fail: tuple[int, float, float] | None  # (index, deviation, tolerance) of the first position out of tolerance

    @property
    def ok(self) -> bool:
        return self.first_fail is None


def relative_deviation(x: float, y: float) -> float:
    """``|x - y| / max(|x|, |y|)``; NaN never agrees."""
    if x != x or y != y:
        return float("inf")
    return abs(x - y) / max(abs(x), abs(y), 1e-12)


def deviation(a: Sequence[float], b: Sequence[float], bound: Callable[[int], float]) -> Deviation:
    """Largest relative deviation over the common positions; ``bound(index)`` is the tolerance at an index."""
    compared = min(len(a), len(b))
    worst, at, tol, fail = 0.0, None, None, None
    for index in range(compared):
        dev, limit = relative_deviation(float(a[index]), float(b[index])), bound(index)
        if dev > limit and fail is None:
            fail = (index, dev, limit)
        if dev >= worst:
            worst, at, tol = dev, index, limit
    return Deviation(compared, worst, at, tol, fail)


def compare_losses(a: Sequence[float], b: Sequence[float], precision: str) -> Deviation:
    """The per-step comparison of the first losses (``at``: the 0-based index, step ``at + 1``)."""
    return deviation(a, b, lambda index: tolerance(precision, index + 1))


def compare_block_means(a: Sequence[float], b: Sequence[float], precision: str) -> Deviation:
    """The block-mean comparison over the whole run (``at``: the 0-based block index)."""
    return deviation(a, b, lambda index: block_tolerance(precision, index))


@dataclass(frozen=True)
class TrajectoryRun:
    """What the verdicts read of one ok training run."""

    run_id: str
    engine: str
    precision: str
    key: tuple[Any, ...]  # the comparison cell
    repeat: int
    init_sha256: str | None  # work.init.sha256: set only for shared weights
    losses: tuple[float, ...] = ()  # the first K per-step losses
    block_losses: tuple[float, ...] = ()  # the mean loss of each harness block

    def series(self, kind: str) -> tuple[float, ...]:
        return self.losses if kind == STEPS else self.block_losses


@dataclass(frozen=True)
class Verdict:
    """One row of the summary's ``numerical_parity``: an engine pair of a cell, one kind of comparison."""

    cell: tuple[Any, ...]
    precision: str
    engines: tuple[str, str]
    runs: tuple[str, str]
    kind: str  # STEPS or BLOCK_MEANS
    verdict: str  # ok | parity_warning | n/a
    compared: int  # steps or blocks compared
    max_rel_dev: float | None
    at: int | None  # step (1-based) or block index (0-based) of the largest deviation
    tolerance: float | None
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"cell": list(self.cell), "precision": self.precision, "engines": list(self.engines),
                               "runs": list(self.runs), "kind": self.kind}
        if self.kind == STEPS:
            doc.update(steps=self.compared, at_step=self.at)
        else:
            doc.update(blocks=self.compared, at_block=self.at)
        doc.update(max_rel_dev=self.max_rel_dev, tolerance=self.tolerance, verdict=self.verdict, reason=self.reason)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Verdict:
        """A row of a summary's ``numerical_parity`` (rows without ``kind`` are of first steps)."""
        kind = doc.get("kind", STEPS)
        compared, at = (doc.get("steps", 0), doc.get("at_step")) if kind == STEPS else (doc.get("blocks", 0), doc.get("at_block"))
        return cls(tuple(doc.get("cell") or ()), doc["precision"], tuple(doc["engines"]), tuple(doc["runs"]),  # type: ignore[arg-type]
                   kind, doc["verdict"], compared, doc.get("max_rel_dev"), at, doc.get("tolerance"), doc.get("reason"))


def _judge(kind: str, a: TrajectoryRun, b: TrajectoryRun) -> Verdict:
    base = {"cell": a.key, "precision": a.precision, "engines": (a.engine, b.engine), "runs": (a.run_id, b.run_id), "kind": kind}
    if not a.init_sha256 or a.init_sha256 != b.init_sha256:
        return Verdict(**base, verdict="n/a", compared=0, max_rel_dev=None, at=None, tolerance=None,
                       reason="not started from the same shared weights (workload.init: shared)")
    if kind == STEPS:
        found = deviation(a.losses, b.losses, lambda index: tolerance(a.precision, index + 1))
        at = None if found.at is None else found.at + 1
        where = None if found.first_fail is None else f"step {found.first_fail[0] + 1}: losses"
    else:
        found = compare_block_means(a.block_losses, b.block_losses, a.precision)
        at = found.at
        where = None if found.first_fail is None else f"block {found.first_fail[0]}: mean losses"
    reason = None
    if found.first_fail is not None:
        reason = f"{where} differ by {found.first_fail[1]:.2e} (relative), tolerance {found.first_fail[2]:.1e}"
    return Verdict(**base, verdict="ok" if found.ok else "parity_warning", compared=found.compared,
                   max_rel_dev=found.max_rel_dev, at=at, tolerance=found.tolerance, reason=reason)


def numerical_parity(runs: Sequence[TrajectoryRun]) -> list[Verdict]:
    """Verdicts per comparison cell, engine pair and kind (steps where both runs have per-step losses,
    block means where both have block losses). The first repeat with the series stands for its engine."""
    verdicts = []
    for kind in (STEPS, BLOCK_MEANS):
        cells: dict[Any, dict[str, TrajectoryRun]] = defaultdict(dict)
        for run in sorted(runs, key=lambda r: r.repeat):
            if run.series(kind):
                cells[run.key].setdefault(run.engine, run)
        for by_engine in cells.values():
            for a, b in combinations(sorted(by_engine), 2):
                verdicts.append(_judge(kind, by_engine[a], by_engine[b]))
    return verdicts
