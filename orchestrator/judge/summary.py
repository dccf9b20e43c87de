"""Summarise an artifact's runs: per-group statistics, cross-engine throughput ratios and strong scaling."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from orchestrator.judge.stats import interval_kind, ratio_of_medians, ratio_range, sample_summary, significance
from orchestrator.judge.trajectory import TrajectoryRun, Verdict, numerical_parity
from orchestrator.judge.trust import GroupFacts, RunFacts, TrustWarning, group_warnings, run_warnings
from orchestrator.judge.utilisation import utilisation

GROUP_KEYS = ("engine", "precision", "path", "batch_per_device", "devices")


def _run_row(record: dict[str, Any], result: dict[str, Any] | None, warnings: list[TrustWarning]) -> dict[str, Any]:
    measurements = (result or {}).get("measurements") or {}
    row = {k: record[k] for k in ("run_id", "engine", "precision", "path", "batch_per_device", "devices", "repeat", "status")}
    row["reason"] = record.get("reason")
    row["throughput"] = record.get("throughput")
    row["apparent_throughput"] = record.get("apparent_throughput")
    row["work_shortfall"] = work_shortfall(record)
    row["weight_change"] = (((result or {}).get("work") or {}).get("weight_change") or {}).get("relative")
    row["setup_s"] = measurements.get("setup_s")
    row["warmup_s"] = measurements.get("warmup_s")
    row["samples"] = ((result or {}).get("work") or {}).get("samples")
    row.update(_energy(record, row["samples"]))
    row.update(utilisation(result, row["throughput"]))
    row["warnings"] = [w.to_json() for w in warnings]
    return row


# counted work the parity check compares, and the noun the summary uses for it
SHORTFALL_FIELDS = {"steps": "updates", "samples": "samples", "epochs": "epochs"}


def work_shortfall(record: dict[str, Any]) -> str | None:
    """'381 of 780 updates' when parity found that a run did less (or more) counted work than its spec."""
    for mismatch in (record.get("parity") or {}).get("mismatches") or []:
        noun = SHORTFALL_FIELDS.get(mismatch.get("field"))
        if noun and isinstance(mismatch.get("expected"), int) and isinstance(mismatch.get("actual"), int):
            return f"{mismatch['actual']} of {mismatch['expected']} {noun}"
    return None


def _energy(record: dict[str, Any], samples: int | None) -> dict[str, Any]:
    """GPU telemetry of a run: energy over the whole engine process and energy per processed sample."""
    gpu = (record.get("telemetry") or {}).get("gpu")
    if not gpu:
        return {"energy_j": None, "energy_per_sample_j": None, "power_w_mean": None, "gpu_util_pct_mean": None,
                "telemetry": "not recorded"}
    if not gpu.get("available"):
        return {"energy_j": None, "energy_per_sample_j": None, "power_w_mean": None, "gpu_util_pct_mean": None,
                "telemetry": f"unavailable: {gpu.get('reason') or 'unknown reason'}"}
    energy = gpu.get("energy_j")
    return {
        "energy_j": energy,
        "energy_per_sample_j": energy / samples if energy is not None and samples else None,
        "power_w_mean": (gpu.get("power_w") or {}).get("mean"),
        "gpu_util_pct_mean": (gpu.get("util_pct") or {}).get("mean"),
        "telemetry": "ok" if energy is not None else "no energy: " + "; ".join(gpu.get("notes") or ["unsupported"]),
    }


def _telemetry_overview(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether GPU telemetry and energy were available, and why not."""
    states = [row["telemetry"] for row in rows if row["status"] != "skipped"]
    with_energy = sum(1 for row in rows if row.get("energy_j") is not None)
    reasons = sorted({s for s in states if s != "ok"})
    return {"available": any(s == "ok" or s.startswith("no energy") for s in states), "runs": len(states),
            "runs_with_energy": with_energy, "reasons": reasons,
            "energy_definition": "GPU energy of the whole engine process (setup, warmup and steady state) "
                                 "divided by the samples it processed"}


def _median(values: list[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    mid = len(present) // 2
    return present[mid] if len(present) % 2 else (present[mid - 1] + present[mid]) / 2


def _time_to_train(estimate: dict[str, Any] | None, throughput: dict[str, Any] | None) -> float | None:
    """Hours to process ``estimate.epochs`` x ``estimate.samples`` at the median throughput (NVIDIA's table)."""
    if not estimate or not throughput or not throughput.get("median"):
        return None
    return estimate["epochs"] * estimate["samples"] / throughput["median"] / 3600.0


def summarize(scenario: str, artifact_id: str, smoke: bool, runs: list[tuple[dict[str, Any], dict[str, Any] | None]],
              host: dict[str, Any] | None = None, cross_parity: list[dict[str, Any]] | None = None,
              estimate: dict[str, Any] | None = None, reference: str | None = None) -> dict[str, Any]:
    """``runs``: (run record, engine result or None) in execution order; ``estimate``: the scenario's
    ``measurement.time_to_train`` ({epochs, samples}) for the derived time-to-train figure; ``reference``:
    the engine every ratio is taken against (default: the first engine that ran)."""
    host_cpus = (host or {}).get("cpu_count")
    trust = [run_warnings(RunFacts.of(record, result, host_cpus)) if result else [] for record, result in runs]
    rows = [_run_row(record, result, warnings) for (record, result), warnings in zip(runs, trust, strict=True)]
    verdicts = _numerical_parity(runs)
    for verdict in verdicts:
        if verdict.verdict == "parity_warning":
            for row in rows:
                if row["run_id"] in verdict.runs:
                    text = f"numerical parity {' vs '.join(verdict.engines)} ({verdict.kind}): {verdict.reason}"
                    row["parity_warning"] = f"{row['parity_warning']}; {text}" if row.get("parity_warning") else text
    if reference is None:
        reference = next((row["engine"] for row in rows if row["status"] != "skipped"), None)
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row["status"]] += 1
    grouped: dict[tuple, list[tuple[dict[str, Any], dict[str, Any] | None]]] = defaultdict(list)
    run_trust: dict[str, list[TrustWarning]] = {}
    for (_record, result), row, warnings in zip(runs, rows, trust, strict=True):
        grouped[tuple(row[k] for k in GROUP_KEYS)].append((row, result))
        run_trust[row["run_id"]] = warnings
    groups = []
    valid_throughputs: dict[tuple, list[float]] = {}
    for key, members in grouped.items():
        valid = [(row, res) for row, res in members if row["status"] == "ok" and row["throughput"]]
        throughputs = [row["throughput"] for row, _ in valid]
        latency = [res["measurements"]["latency_ms"]["mean"] for _, res in valid if res and "latency_ms" in res["measurements"]]
        summary_tp = sample_summary(throughputs)
        warnings = group_warnings(GroupFacts(tuple(throughputs)), [(row["repeat"], run_trust[row["run_id"]]) for row, _ in valid])
        group = dict(zip(GROUP_KEYS, key, strict=True))
        group.update(
            n=len(valid),
            n_total=len(members),
            throughput=summary_tp,
            setup_s=sample_summary([row["setup_s"] for row, _ in valid if row["setup_s"] is not None]),
            warmup_s=sample_summary([row["warmup_s"] for row, _ in valid if row["warmup_s"] is not None]),
            latency_ms=_latency(valid) if latency else None,
            energy_per_sample_j=sample_summary([row["energy_per_sample_j"] for row, _ in valid if row.get("energy_per_sample_j") is not None]),
            power_w=sample_summary([row["power_w_mean"] for row, _ in valid if row.get("power_w_mean") is not None]),
            achieved_tflops=_median([row["achieved_tflops"] for row, _ in valid]),
            peak_fraction=_median([row["peak_fraction"] for row, _ in valid]),
            gmacs_per_sample=next((row["gmacs_per_sample"] for row, _ in members if row.get("gmacs_per_sample")), None),
            time_to_train_h=_time_to_train(estimate, summary_tp),
            warnings=[w.message for w in warnings],  # the tables' warnings column
            warning_ids=[w.id for w in warnings],  # orchestrator.judge.trust.KINDS, one per warning
            apparent=_apparent(members),
            weight_change=_median([row["weight_change"] for row, _ in valid]),
        )
        groups.append(group)
        if throughputs:
            valid_throughputs[key] = throughputs
    return {
        "schema_version": 1,
        "scenario": scenario,
        "artifact_id": artifact_id,
        "smoke": smoke,
        "host": host or {},
        "counts": dict(counts),
        "runs": rows,
        "groups": groups,
        "reference_engine": reference,
        "ratios": _ratios(valid_throughputs, reference),
        "scaling": scaling(groups, valid_throughputs),
        "cross_engine_parity": cross_parity or [],
        "numerical_parity": [verdict.to_json() for verdict in verdicts],
        "telemetry": _telemetry_overview(rows),
    }


def _apparent(members: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> dict[str, Any] | None:
    """The invalid runs' throughput as their engine counted it, with why it is not a measurement (None when no run is invalid)."""
    invalid = [row for row, _ in members if row["status"] == "invalid" and row.get("apparent_throughput")]
    if not invalid:
        return None
    reasons = sorted({row.get("work_shortfall") or row.get("reason") or "invalid" for row in invalid})
    return {"n": len(invalid), "throughput": sample_summary([row["apparent_throughput"] for row in invalid]), "reasons": reasons,
            "weight_change": _median([row.get("weight_change") for row in invalid])}


def _latency(valid: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> dict[str, float]:
    """Median over repeats of each latency statistic."""
    import numpy as np

    keys = ("mean", "p50", "p90", "p95", "p99")
    latencies = [res["measurements"].get("latency_ms") or {} for _, res in valid if res]
    values = {k: [lat[k] for lat in latencies if k in lat] for k in keys}
    return {k: float(np.median(v)) for k, v in values.items() if v}


def _ratios(throughputs: dict[tuple, list[float]], reference: str | None) -> list[dict[str, Any]]:
    """engine / reference engine for every other engine sharing precision, path, batch and devices (valid runs only).

    One direction per pair: the reference is the denominator (a cell without it has no ratio).
    """
    cells: dict[tuple, dict[str, list[float]]] = defaultdict(dict)
    for (engine, precision, path, batch, devices), values in throughputs.items():
        cells[(precision, path, batch, devices)][engine] = values
    out = []
    for (precision, path, batch, devices), engines in cells.items():
        if reference not in engines:
            continue
        for a in sorted(e for e in engines if e != reference):
            ratio, ci = ratio_of_medians(engines[a], engines[reference])
            test = significance(engines[reference], engines[a])
            out.append({"precision": precision, "path": path, "batch_per_device": batch, "devices": devices,
                        "engine": a, "baseline_engine": reference, "ratio": ratio, "ci95": ci,
                        "interval": interval_kind(min(len(engines[a]), len(engines[reference]))),
                        "range": ratio_range(engines[a], engines[reference]),
                        "p_value": test["p_value"], "significant": test["significant"], "note": test["note"]})
    return out


def _numerical_parity(runs: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> list[Verdict]:
    """Loss-trajectory verdicts per engine pair over the ok training runs (orchestrator.judge.trajectory)."""
    candidates = []
    for record, result in runs:
        if record["status"] != "ok" or not result:
            continue
        measurements = result.get("measurements") or {}
        candidates.append(TrajectoryRun(
            run_id=record["run_id"], engine=record["engine"], precision=record["precision"], repeat=record["repeat"],
            key=(record["precision"], record["path"], record["batch_per_device"], record["devices"]),
            init_sha256=((result.get("work") or {}).get("init") or {}).get("sha256"),
            losses=tuple(measurements.get("losses") or ()), block_losses=tuple(measurements.get("block_losses") or ()),
        ))
    return numerical_parity(candidates)


SCALING_NOTE = ("speedup = median throughput on N devices / median on 1 device of the same engine, precision, path and "
                "per-device batch (the global batch grows with N); efficiency = speedup / N")


def scaling(groups: list[dict[str, Any]], throughputs: dict[tuple, list[float]]) -> list[dict[str, Any]]:
    """Strong-scaling rows: every device count of each (engine, precision, path, per-device batch) cell
    that has a run on more than one device, against that cell's 1-device run (valid runs only).

    ``speedup_ci95``: bootstrap interval of the ratio of medians (3+ repeats a side). A device count
    whose runs all failed has no throughput; a cell without a valid 1-device run has no speedup.
    """
    cells: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for g in groups:
        cells[(g["engine"], g["precision"], g["path"], g["batch_per_device"])].append(g)
    out = []
    for cell, members in sorted(cells.items()):
        if not any(g["devices"] > 1 for g in members):
            continue
        base = throughputs.get((*cell, 1))
        base_median = _median(list(base)) if base else None
        for g in sorted(members, key=lambda g: g["devices"]):
            values = throughputs.get((*cell, g["devices"]))
            row: dict[str, Any] = {
                "engine": cell[0], "precision": cell[1], "path": cell[2], "batch_per_device": cell[3],
                "devices": g["devices"], "batch_global": cell[3] * g["devices"], "n": len(values or []),
                "throughput": _median(list(values)) if values else None, "baseline_throughput": base_median,
                "speedup": None, "speedup_ci95": None, "speedup_range": None, "efficiency": None, "note": None,
            }
            if not values:
                row["note"] = "no valid run on this device count"
            elif not base:
                row["note"] = "no valid 1-device run to compare with"
            else:
                speedup, ci = ratio_of_medians(values, base)
                row.update(speedup=speedup, speedup_ci95=ci, speedup_range=ratio_range(values, base), efficiency=speedup / g["devices"])
            out.append(row)
    return out
