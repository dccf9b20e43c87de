"""Summarise an artifact's runs: per-group statistics, cross-engine throughput ratios and strong scaling."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from bench_engine.contract import EngineResult
from orchestrator.judge.record import RunRecord
from orchestrator.judge.stats import interval_kind, ratio_of_medians, ratio_range, sample_summary, significance
from orchestrator.judge.summary_model import (
    ENERGY_DEFINITION,
    GROUP_KEYS,
    MIXED_ENERGY_DEFINITION,
    STEADY_ENERGY_DEFINITION,
    ApparentGroup,
    CrossFinding,
    GroupRow,
    Ratio,
    RunRow,
    ScalingRow,
    Summary,
    TelemetryOverview,
)
from orchestrator.judge.trajectory import TrajectoryRun, Verdict, numerical_parity
from orchestrator.judge.trust import GroupFacts, RunFacts, TrustWarning, group_warnings, run_warnings
from orchestrator.judge.utilisation import utilisation
from orchestrator.scenario.blocks import TimeToTrain

__all__ = ["GROUP_KEYS", "scaling", "summarize", "work_shortfall"]

# the steady window (the timing phase as the host heard it) may be this much shorter than the engine's own timed
# windows before it is not trusted to bracket them (the lines' arrival and the clocks' reads differ by milliseconds)
WINDOW_TOLERANCE = 0.01

Run = tuple[RunRecord, EngineResult | None]  # a run record and its engine result (None when there is none)


class Member(NamedTuple):
    """One run of a group: its summary row, its engine result and its trust warnings."""

    row: RunRow
    result: EngineResult | None
    warnings: Sequence[TrustWarning]
    node_type: str | None = None  # the kind of node it ran on, where the runtime knows it (RuntimeFacts.node_type)

    @property
    def valid(self) -> bool:
        return self.row.status == "ok" and bool(self.row.throughput)


def _run_row(record: RunRecord, result: EngineResult | None, warnings: Sequence[TrustWarning]) -> RunRow:
    measurements = result.measurements if result is not None else None
    work = (result.work if result is not None else None) or {}
    samples = work.get("samples")
    return RunRow(
        run_id=record.run_id, engine=record.engine, precision=record.precision, path=record.path,
        batch_per_device=record.batch_per_device, devices=record.devices, repeat=record.repeat, status=record.status,
        reason=record.reason, throughput=record.throughput, apparent_throughput=record.apparent_throughput,
        work_shortfall=work_shortfall(record), weight_change=(work.get("weight_change") or {}).get("relative"),
        setup_s=measurements.setup_s if measurements else None, warmup_s=measurements.warmup_s if measurements else None,
        samples=samples, **_energy(record, result, samples), **utilisation(result, record.throughput)._asdict(), warnings=tuple(warnings),
    )


# counted work the parity check compares, and the noun the summary uses for it
SHORTFALL_FIELDS = {"steps": "updates", "samples": "samples", "epochs": "epochs"}


def work_shortfall(record: RunRecord) -> str | None:
    """'381 of 780 updates' when parity found that a run did less (or more) counted work than its spec."""
    for mismatch in record.parity.mismatches:
        noun = SHORTFALL_FIELDS.get(mismatch.field)
        if noun and isinstance(mismatch.expected, int) and isinstance(mismatch.actual, int):
            return f"{mismatch.actual} of {mismatch.expected} {noun}"
    return None


def _energy(record: RunRecord, result: EngineResult | None, samples: int | None) -> dict[str, float | str | None]:
    """GPU telemetry of a run (RunRow's fields): the whole engine process's energy, and energy per sample and mean
    power over the steady window (the timing phase: its energy over the timed samples) where the record has it,
    else over the whole process (its energy over every processed sample; ``energy_scope`` says which)."""
    gpu = (record.telemetry or {}).get("gpu")
    none = {"energy_j": None, "energy_per_sample_j": None, "energy_scope": None, "power_w_mean": None, "gpu_util_pct_mean": None}
    if not gpu:
        return {**none, "telemetry": "not recorded"}
    if not gpu.get("available"):
        return {**none, "telemetry": f"unavailable: {gpu.get('reason') or 'unknown reason'}"}
    energy = gpu.get("energy_j")
    steady = _steady_energy(gpu, result)
    if steady is not None:
        per_sample, power = steady
        scope: str | None = "steady"
    else:
        per_sample = energy / samples if energy is not None and samples else None
        power, scope = (gpu.get("power_w") or {}).get("mean"), "process" if per_sample is not None else None
    return {
        "energy_j": energy, "energy_per_sample_j": per_sample, "energy_scope": scope, "power_w_mean": power,
        "gpu_util_pct_mean": (gpu.get("util_pct") or {}).get("mean"),
        "telemetry": "ok" if energy is not None else "no energy: " + "; ".join(gpu.get("notes") or ["unsupported"]),
    }


def _steady_energy(gpu: Mapping[str, Any], result: EngineResult | None) -> tuple[float, float] | None:
    """(J per timed sample, mean W) over the timing phase, or None: no steady window in the record, no timed samples,
    a window shorter than the engine's own timed windows (the phase lines did not bracket the timed steps), or more
    energy in the window than in the whole process."""
    joules, window = gpu.get("steady_energy_j"), gpu.get("steady_window_s")
    steady = (result.measurements.steady if result is not None and result.measurements is not None else None) or {}
    timed_samples, timed_s = steady.get("samples"), steady.get("time_s")
    if not (_positive(joules) and _positive(window) and isinstance(timed_samples, int) and timed_samples > 0 and _positive(timed_s)):
        return None
    if window < timed_s * (1.0 - WINDOW_TOLERANCE):
        return None
    if _positive(gpu.get("energy_j")) and joules > gpu["energy_j"] * (1.0 + WINDOW_TOLERANCE):
        return None  # more than the whole process's: not a part of it
    return joules / timed_samples, joules / window


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _telemetry_overview(rows: Sequence[RunRow]) -> TelemetryOverview:
    """Whether GPU telemetry and energy were available, and why not."""
    states = [row.telemetry or "" for row in rows if row.status != "skipped"]
    with_energy = sum(1 for row in rows if row.energy_j is not None)
    scopes = {row.energy_scope for row in rows if row.energy_scope}
    definition = (MIXED_ENERGY_DEFINITION if len(scopes) > 1 else STEADY_ENERGY_DEFINITION if scopes == {"steady"}
                  else ENERGY_DEFINITION)
    return TelemetryOverview(available=any(s == "ok" or s.startswith("no energy") for s in states), runs=len(states),
                             runs_with_energy=with_energy, reasons=tuple(sorted({s for s in states if s != "ok"})),
                             energy_definition=definition)


def _median(values: Sequence[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    mid = len(present) // 2
    return present[mid] if len(present) % 2 else (present[mid - 1] + present[mid]) / 2


def _time_to_train(estimate: TimeToTrain | None, median: float | None) -> float | None:
    """Hours to process ``estimate.epochs`` x ``estimate.samples`` at the median throughput (NVIDIA's table)."""
    if estimate is None or not median:
        return None
    return estimate.epochs * estimate.samples / median / 3600.0


def summarize(scenario: str, artifact_id: str, smoke: bool, runs: Sequence[Run], host: Mapping[str, Any] | None = None,
              cross_parity: Sequence[CrossFinding] = (), estimate: TimeToTrain | None = None,
              reference: str | None = None) -> Summary:
    """``runs``: (run record, engine result or None) in execution order; ``estimate``: the scenario's
    ``measurement.time_to_train`` ({epochs, samples}) for the derived time-to-train figure; ``reference``:
    the engine every ratio is taken against (default: the first engine that ran)."""
    host_cpus = (host or {}).get("cpu_count")
    verdicts = _numerical_parity(runs)
    members = []
    for record, result in runs:
        warnings = run_warnings(RunFacts.of(record, result, host_cpus)) if result else []
        members.append(Member(_with_parity_warnings(_run_row(record, result, warnings), verdicts), result, warnings,
                              record.runtime.get("node_type")))
    rows = tuple(m.row for m in members)
    if reference is None:
        reference = next((row.engine for row in rows if row.status != "skipped"), None)
    grouped: dict[tuple[Any, ...], list[Member]] = defaultdict(list)
    for member in members:
        grouped[member.row.group].append(member)
    groups = tuple(_group(key, group, estimate) for key, group in grouped.items())
    valid = {key: [m.row.throughput for m in group if m.valid] for key, group in grouped.items()}
    throughputs = {key: values for key, values in valid.items() if values}
    return Summary(
        scenario=scenario, artifact_id=artifact_id, smoke=smoke, host=dict(host or {}), counts=dict(Counter(r.status for r in rows)),
        runs=rows, groups=groups, reference_engine=reference, ratios=tuple(_ratios(throughputs, reference)),
        scaling=tuple(scaling(groups, throughputs)), cross_engine_parity=tuple(cross_parity), numerical_parity=tuple(verdicts),
        telemetry=_telemetry_overview(rows),
    )


def _with_parity_warnings(row: RunRow, verdicts: Sequence[Verdict]) -> RunRow:
    """The row with the numerical-parity warnings of the verdicts that name its run."""
    texts = [f"numerical parity {' vs '.join(v.engines)} ({v.kind}): {v.reason}"
             for v in verdicts if v.verdict == "parity_warning" and row.run_id in v.runs]
    return dataclasses.replace(row, parity_warning="; ".join(texts)) if texts else row


def _group(key: tuple[Any, ...], members: Sequence[Member], estimate: Mapping[str, Any] | None) -> GroupRow:
    """The statistics of one group over its valid repeats."""
    valid = [m for m in members if m.valid]
    throughputs = [m.row.throughput for m in valid if m.row.throughput is not None]
    summary_tp = sample_summary(throughputs)
    facts = GroupFacts(tuple(throughputs), tuple(m.node_type for m in valid if m.node_type))
    warnings = group_warnings(facts, [(m.row.repeat or 0, m.warnings) for m in valid])
    rows = [m.row for m in valid]
    return GroupRow(
        **dict(zip(GROUP_KEYS, key, strict=True)), n=len(valid), n_total=len(members), throughput=summary_tp,
        setup_s=sample_summary([r.setup_s for r in rows if r.setup_s is not None]),
        warmup_s=sample_summary([r.warmup_s for r in rows if r.warmup_s is not None]),
        latency_ms=_latency(valid),
        energy_per_sample_j=sample_summary([r.energy_per_sample_j for r in _one_scope(rows) if r.energy_per_sample_j is not None]),
        power_w=sample_summary([r.power_w_mean for r in _one_scope(rows) if r.power_w_mean is not None]),
        achieved_tflops=_median([r.achieved_tflops for r in rows]), peak_fraction=_median([r.peak_fraction for r in rows]),
        gmacs_per_sample=next((m.row.gmacs_per_sample for m in members if m.row.gmacs_per_sample), None),
        time_to_train_h=_time_to_train(estimate, summary_tp.median if summary_tp else None),
        warnings=tuple(w.message for w in warnings), warning_ids=tuple(w.id for w in warnings),
        apparent=_apparent([m.row for m in members]), weight_change=_median([r.weight_change for r in rows]),
    )


def _one_scope(rows: Sequence[RunRow]) -> list[RunRow]:
    """The rows whose energy covers the steady window where any does (a group never mixes it with whole-process energy)."""
    steady = [row for row in rows if row.energy_scope == "steady"]
    return steady or [row for row in rows if row.energy_scope != "steady"]


def _apparent(rows: Sequence[RunRow]) -> ApparentGroup | None:
    """The invalid runs' throughput as their engine counted it, with why it is not a measurement (None when no run is invalid)."""
    invalid = [row for row in rows if row.status == "invalid" and row.apparent_throughput]
    if not invalid:
        return None
    reasons = tuple(sorted({row.work_shortfall or row.reason or "invalid" for row in invalid}))
    return ApparentGroup(len(invalid), sample_summary([row.apparent_throughput for row in invalid if row.apparent_throughput]),
                         reasons, _median([row.weight_change for row in invalid]))


def _latency(valid: Sequence[Member]) -> dict[str, float] | None:
    """Median over repeats of each latency statistic (None when no valid run measured latency)."""
    import numpy as np

    latencies = [m.result.measurements.latency_ms for m in valid
                 if m.result is not None and m.result.measurements is not None and m.result.measurements.latency_ms is not None]
    if not latencies:
        return None
    values = {k: [lat[k] for lat in latencies if k in lat] for k in ("mean", "p50", "p90", "p95", "p99")}
    return {k: float(np.median(v)) for k, v in values.items() if v}


def _ratios(throughputs: Mapping[tuple[Any, ...], list[float]], reference: str | None) -> list[Ratio]:
    """engine / reference engine for every other engine sharing precision, path, batch and devices (valid runs only).

    One direction per pair: the reference is the denominator (a cell without it has no ratio).
    """
    cells: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(dict)
    for (engine, precision, path, batch, devices), values in throughputs.items():
        cells[(precision, path, batch, devices)][engine] = values
    out = []
    for (precision, path, batch, devices), engines in cells.items():
        if reference not in engines:
            continue
        for a in sorted(e for e in engines if e != reference):
            ratio, ci = ratio_of_medians(engines[a], engines[reference])
            test = significance(engines[reference], engines[a])
            out.append(Ratio(precision, path, batch, devices, a, reference, ratio, ci,
                             interval_kind(min(len(engines[a]), len(engines[reference]))), ratio_range(engines[a], engines[reference]),
                             test.p_value, test.significant, test.note))
    return out


def _numerical_parity(runs: Sequence[Run]) -> list[Verdict]:
    """Loss-trajectory verdicts per engine pair over the ok training runs (orchestrator.judge.trajectory)."""
    candidates = []
    for record, result in runs:
        if record.status != "ok" or not result:
            continue
        measurements = result.measurements
        candidates.append(TrajectoryRun(
            run_id=record.run_id, engine=record.engine, precision=record.precision, repeat=record.repeat, key=record.cell,
            init_sha256=(((result.work or {}).get("init")) or {}).get("sha256"),
            losses=measurements.losses if measurements else (), block_losses=measurements.block_losses if measurements else (),
        ))
    return numerical_parity(candidates)


SCALING_NOTE = ("speedup = median throughput on N devices / median on 1 device of the same engine, precision, path and "
                "per-device batch (the global batch grows with N); efficiency = speedup / N")


def scaling(groups: Sequence[GroupRow], throughputs: Mapping[tuple[Any, ...], list[float]]) -> list[ScalingRow]:
    """Strong-scaling rows: every device count of each (engine, precision, path, per-device batch) cell
    that has a run on more than one device, against that cell's 1-device run (valid runs only).

    ``speedup_ci95``: bootstrap interval of the ratio of medians (3+ repeats a side). A device count
    whose runs all failed has no throughput; a cell without a valid 1-device run has no speedup.
    """
    cells: dict[tuple[Any, ...], list[GroupRow]] = defaultdict(list)
    for g in groups:
        cells[(g.engine, g.precision, g.path, g.batch_per_device)].append(g)
    out = []
    for cell, members in sorted(cells.items()):
        if any(g.devices > 1 for g in members):
            base = throughputs.get((*cell, 1))
            out += [_scaling_row(cell, g.devices, throughputs.get((*cell, g.devices)), base)
                    for g in sorted(members, key=lambda g: g.devices)]
    return out


def _scaling_row(cell: tuple[Any, ...], devices: int, values: list[float] | None, base: list[float] | None) -> ScalingRow:
    """One device count of a scaling cell against its 1-device throughputs ``base``."""
    engine, precision, path, batch = cell
    row = ScalingRow(engine, precision, path, batch, devices, throughput=_median(list(values)) if values else None,
                     speedup=None, efficiency=None, batch_global=batch * devices, n=len(values or []),
                     baseline_throughput=_median(list(base)) if base else None)
    if not values:
        return dataclasses.replace(row, note="no valid run on this device count")
    if not base:
        return dataclasses.replace(row, note="no valid 1-device run to compare with")
    speedup, ci = ratio_of_medians(values, base)
    return dataclasses.replace(row, speedup=speedup, speedup_ci95=ci, speedup_range=ratio_range(values, base),
                               efficiency=speedup / devices)
