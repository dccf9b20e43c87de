"""Compare two artifacts: per matching group, B's steady-state throughput relative to A's.

A group is one engine x precision x path x batch per device x devices. For every group present in both
artifacts: ``ratio = median(B) / median(A)`` of the valid repeats' steady-state throughput (above 1: B is
faster), its bootstrap 95% interval (3+ repeats a side), and a two-sided Mann-Whitney U test over the
repeats (significant when p < alpha; ``n/a`` with fewer than 2 repeats a side). A change of the ratio
smaller than ``min_change_pct`` (pyperf's minimum speed) reads "no change", significant or not.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.judge.stats import ALPHA, compare_samples
from orchestrator.judge.summary import GROUP_KEYS

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


def _groups(summary: dict[str, Any]) -> tuple[dict[tuple, list[float]], dict[tuple, int]]:
    """Valid throughputs and number of runs (skipped excluded) per group key."""
    values: dict[tuple, list[float]] = defaultdict(list)
    counts: dict[tuple, int] = defaultdict(int)
    for row in summary["runs"]:
        if row.get("status") == "skipped":
            continue
        key = tuple(row.get(k) for k in GROUP_KEYS)
        counts[key] += 1
        if row.get("status") == "ok" and row.get("throughput"):
            values[key].append(float(row["throughput"]))
    return values, counts


def _side(summary: dict[str, Any], label: str) -> dict[str, Any]:
    host = summary.get("host") or {}
    gpus = [g.get("name") for g in (host.get("nvml") or {}).get("gpus", [])]
    return {"artifact": label, "scenario": summary["scenario"], "artifact_id": summary["artifact_id"],
            "smoke": summary.get("smoke", False), "hostname": host.get("hostname"), "gpus": gpus}


def _verdict(entry: dict[str, Any], min_change_pct: float) -> str:
    if entry["n_a"] == 0 or entry["n_b"] == 0:
        return "n/a: no valid run in " + ("A" if entry["n_a"] == 0 else "B")
    if entry["change_pct"] is not None and abs(entry["change_pct"]) < min_change_pct:
        return NO_CHANGE
    if entry["significant"] is None:
        return "n/a: needs 2+ repeats a side"
    if not entry["significant"]:
        return "no significant difference" + (" (too few repeats to reach significance)" if entry.get("note") else "")
    return "B faster" if entry["ratio"] > 1 else "B slower"


def compare_summaries(a: dict[str, Any], b: dict[str, Any], label_a: str = "A", label_b: str = "B",
                      alpha: float = ALPHA, min_change_pct: float = MIN_CHANGE_PCT,
                      environment: dict[str, Any] | None = None) -> dict[str, Any]:
    """The comparison document (what ``bench results compare --json`` prints); ``environment``: the
    metadata diff of the two artifacts (orchestrator.judge.environment_diff.environment_diff), included as given."""
    values_a, counts_a = _groups(a)
    values_b, counts_b = _groups(b)
    keys_a, keys_b = set(counts_a), set(counts_b)
    order = [k for k in counts_a if k in keys_b]
    rows = []
    for key in order:
        xs, ys = values_a.get(key, []), values_b.get(key, [])
        entry: dict[str, Any] = dict(zip(GROUP_KEYS, key, strict=True))
        entry.update(n_a=len(xs), n_b=len(ys), runs_a=counts_a[key], runs_b=counts_b[key],
                     median_a=None, median_b=None, ratio=None, ci95=None, range=None, interval=None, change_pct=None,
                     p_value=None, significant=None, note=None)
        if xs and ys:
            import numpy as np

            result = compare_samples(xs, ys, alpha=alpha)
            entry.update(median_a=float(np.median(xs)), median_b=float(np.median(ys)), ratio=result["ratio"],
                         ci95=result["ci95"], range=result["range"], interval=result["interval"],
                         change_pct=(result["ratio"] - 1.0) * 100.0,
                         p_value=result["p_value"], significant=result["significant"], note=result["note"])
        entry["below_min_change"] = entry["change_pct"] is not None and abs(entry["change_pct"]) < min_change_pct
        entry["verdict"] = _verdict(entry, min_change_pct)
        rows.append(entry)
    warnings = []
    if a["scenario"] != b["scenario"]:
        warnings.append(f"different scenarios: A is {a['scenario']}, B is {b['scenario']}")
    if a.get("smoke") != b.get("smoke"):
        warnings.append("one artifact is a --smoke run: its throughput is not comparable")
    side_a, side_b = _side(a, label_a), _side(b, label_b)
    if side_a["gpus"] != side_b["gpus"]:
        warnings.append(f"different GPUs: A {side_a['gpus'] or 'none'}, B {side_b['gpus'] or 'none'}")
    if not rows:
        warnings.append("no group is present in both artifacts")

    def listing(keys: set[tuple], counts: dict[tuple, int]) -> list[dict[str, Any]]:
        return [{**dict(zip(GROUP_KEYS, k, strict=True)), "runs": counts[k]} for k in counts if k in keys]

    return {
        "a": side_a,
        "b": side_b,
        "direction": DIRECTION,
        "alpha": alpha,
        "min_change_pct": min_change_pct,
        "verdicts": f"{NO_CHANGE}: |change| < {min_change_pct:g}% (significant or not); else B faster/slower when significant",
        "test": "two-sided Mann-Whitney U over the valid repeats; interval: bootstrap 95% (percentile) of the ratio with 5+ repeats a side, "
                "else the range min(B)/max(A) .. max(B)/min(A)",
        "groups": rows,
        "only_in_a": listing(keys_a - keys_b, counts_a),
        "only_in_b": listing(keys_b - keys_a, counts_b),
        "warnings": warnings,
        "environment": environment,
    }
