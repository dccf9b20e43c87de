"""Numerical parity: with the same initial weights, data order and updates, engines' first losses agree.

Every training result records the loss of its first K steps (``measurements.losses``). For each
comparison cell (precision, path, per-device batch, devices) and each pair of engines whose runs
started from the same shared weights (equal ``work.init.sha256``), the largest relative deviation
``|a - b| / max(|a|, |b|)`` over the common steps is compared with the tolerance of its step:
``min(cap, first * growth ** (step - 1))``. fp32 (and tf32) must agree to 1e-3 on step 1, where
only the summation order of identical math differs; later steps amplify those differences through
the updates, so the bound doubles per step (measured on a CPU at 32x32, batch 32, from bench's
shared weights whose residual branches start at zero: PyTorch, JAX and TensorFlow within 2.2e-3
over 5 SGD steps at lr 0.1 and 5e-5 over 5 Adam steps; README "Numerical parity"). bf16 rounds
every activation to 8 bits of mantissa, hence the looser bound; it grows by 1.5 per step because
bf16 rounding moves one engine's own trajectory that much (measured on the CPU smoke, SGD lr 0.1:
JAX bf16 6.0% from JAX fp32 at step 4, PyTorch 2.5% at step 5; the engines' bf16 runs parted by
up to 6.1% there). A pair out of tolerance does not invalidate its runs: the summary marks them
``parity_warning`` and names the step and the deviation.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from typing import Any

# precision -> (tolerance at step 1, growth per step, cap)
TRAJECTORY_TOLERANCE: dict[str, tuple[float, float, float]] = {
    "fp32": (1e-3, 2.0, 5e-2),
    "tf32": (5e-3, 2.0, 1e-1),
    "bf16": (3e-2, 1.5, 2e-1),
    "fp16": (2e-2, 1.5, 2e-1),
}


def tolerance(precision: str, step: int) -> float:
    """The largest relative loss deviation allowed at ``step`` (1-based)."""
    first, growth, cap = TRAJECTORY_TOLERANCE[precision]
    return min(cap, first * growth ** (step - 1))


def compare_losses(a: list[float], b: list[float], precision: str) -> dict[str, Any]:
    """Largest relative deviation over the common steps and whether every step is in tolerance."""
    steps = min(len(a), len(b))
    worst = {"max_rel_dev": 0.0, "at_step": None, "tolerance": None, "ok": True, "steps": steps, "first_fail": None}
    for index in range(steps):
        x, y = float(a[index]), float(b[index])
        scale = max(abs(x), abs(y), 1e-12)
        dev = abs(x - y) / scale if x == x and y == y else float("inf")  # NaN never agrees
        bound = tolerance(precision, index + 1)
        if dev > bound and worst["first_fail"] is None:
            worst["first_fail"] = {"step": index + 1, "rel_dev": dev, "tolerance": bound}
            worst["ok"] = False
        if dev >= worst["max_rel_dev"]:
            worst.update(max_rel_dev=dev, at_step=index + 1, tolerance=bound)
    return worst


def numerical_parity(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One verdict per engine pair and comparison cell.

    ``runs`` items: ``run_id``, ``engine``, ``precision``, ``key`` (the cell), ``repeat``, ``init``
    (the result's ``work.init``) and ``losses``. The first repeat with losses stands for its engine.
    """
    cells: dict[Any, dict[str, dict[str, Any]]] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: r["repeat"]):
        if run.get("losses"):
            cells[run["key"]].setdefault(run["engine"], run)
    verdicts = []
    for key, by_engine in cells.items():
        for a, b in combinations(sorted(by_engine), 2):
            ra, rb = by_engine[a], by_engine[b]
            row: dict[str, Any] = {"cell": list(key), "precision": ra["precision"], "engines": [a, b],
                                   "runs": [ra["run_id"], rb["run_id"]]}
            sha_a, sha_b = (ra.get("init") or {}).get("sha256"), (rb.get("init") or {}).get("sha256")
            if not sha_a or sha_a != sha_b:
                row.update(verdict="n/a", reason="not started from the same shared weights (workload.init: shared)",
                           max_rel_dev=None, at_step=None, tolerance=None, steps=0)
            else:
                found = compare_losses(ra["losses"], rb["losses"], ra["precision"])
                fail = found.pop("first_fail")
                row.update(found)
                row["verdict"] = "ok" if found["ok"] else "parity_warning"
                row["reason"] = None if fail is None else (f"step {fail['step']}: losses differ by {fail['rel_dev']:.2e} "
                                                           f"(relative), tolerance {fail['tolerance']:.1e}")
                row.pop("ok")
            verdicts.append(row)
    return verdicts
