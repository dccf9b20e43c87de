"""NVML samples and their summary: one ``Sample`` per GPU and tick (a row of telemetry.csv), the throttle
reasons' names, and ``summarize_samples``: the ``TelemetrySummary`` a run's record stores under ``telemetry.gpu``
(per-tick totals over the GPUs, then mean and max; energy in joules, from the energy counter or the power's integral,
over the whole engine process and over its timing phase)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from orchestrator.host.gpus import DriverFacts, GpuFacts

CSV_NAME = "telemetry.csv"

CSV_COLUMNS = ("time_s", "gpu", "util_gpu_pct", "util_mem_pct", "mem_used_bytes", "power_w", "sm_clock_mhz",
               "mem_clock_mhz", "temperature_c", "throttle_reasons", "throttle", "energy_mj")

# nvmlClocksEventReason* bits (formerly nvmlClocksThrottleReason*)
THROTTLE_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}


def throttle_names(mask: int | None) -> list[str]:
    if not mask:
        return []
    names = [name for bit, name in THROTTLE_BITS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_BITS)
    return [*names, f"0x{unknown:x}"] if unknown else names


@dataclass(frozen=True)
class Sample:
    """One NVML sample of one GPU: a row of telemetry.csv (None where NVML did not answer)."""

    time_s: float
    gpu: int
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_bytes: int | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle_reasons: int | None = None
    energy_mj: int | None = None

    @property
    def throttle(self) -> str:
        return "|".join(throttle_names(self.throttle_reasons))

    def csv_row(self) -> list[Any]:
        """The row's cells in CSV_COLUMNS order, '' where None."""
        return ["" if value is None else value for value in (getattr(self, column) for column in CSV_COLUMNS)]


class GpuFactsBlock(NamedTuple):
    """The driver and the sampled GPUs' static facts: the summary's ``driver``, ``cuda_driver`` and ``devices``."""

    driver: DriverFacts
    devices: tuple[GpuFacts, ...]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self.driver), "devices": [device.to_json() for device in self.devices]}


@dataclass(frozen=True)
class TelemetrySummary:
    """What the GPU monitor observed of one run (the record's ``telemetry.gpu`` block), or why it could not."""

    available: bool
    reason: str | None
    csv: str | None = None
    interval_s: float | None = None
    duration_s: float | None = None
    samples: int = 0
    gpus: tuple[int, ...] = ()
    power_w: tuple[float | None, float | None] = (None, None)  # (mean, max) of the per-tick total over GPUs
    util_pct: tuple[float | None, float | None] = (None, None)  # (mean, max) of the per-tick mean over GPUs
    mem_used_max_bytes: int | None = None
    temperature_max_c: float | None = None
    sm_clock_mean_mhz: float | None = None
    throttle_reasons_seen: tuple[str, ...] = ()
    energy_j: float | None = None
    energy_method: str | None = None
    steady_window_s: float | None = None  # how long the engine was in its timing phase (host clock, its phase lines)
    steady_energy_j: float | None = None  # the GPUs' energy over that window (None: no window, or samples missing)
    per_gpu: tuple[GpuSummary, ...] = ()
    facts: GpuFactsBlock | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.available and not self.reason:
            raise ValueError("unavailable telemetry names its reason")

    @classmethod
    def unavailable(cls, reason: str) -> TelemetrySummary:
        return cls(False, reason)

    def to_json(self) -> dict[str, Any]:
        if not self.available:
            return {"available": False, "reason": self.reason}
        return {
            "available": True, "reason": self.reason, "csv": self.csv, "interval_s": self.interval_s,
            "duration_s": self.duration_s, "samples": self.samples, "gpus": list(self.gpus),
            "power_w": {"mean": self.power_w[0], "max": self.power_w[1]},
            "util_pct": {"mean": self.util_pct[0], "max": self.util_pct[1]},
            "mem_used_max_bytes": self.mem_used_max_bytes, "temperature_max_c": self.temperature_max_c,
            "sm_clock_mean_mhz": self.sm_clock_mean_mhz, "throttle_reasons_seen": list(self.throttle_reasons_seen),
            "energy_j": self.energy_j, "energy_method": self.energy_method, "steady_window_s": self.steady_window_s,
            "steady_energy_j": self.steady_energy_j, "per_gpu": [g.to_json() for g in self.per_gpu],
            **(self.facts.to_json() if self.facts else {}), "notes": list(self.notes),
        }


def _mean(values: list[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


class GpuSummary(NamedTuple):
    """The samples of one GPU summarised: ``per_gpu`` of the summary (``_asdict()``), and its energy as measured."""

    gpu: int
    samples: int
    power_w_mean: float | None
    power_w_max: float | None
    util_pct_mean: float | None
    mem_used_max_bytes: int | None
    energy_j: float | None
    method: str | None  # energy_counter | power_integral | None: no energy

    def to_json(self) -> dict[str, Any]:
        """The entry of ``per_gpu`` in run.json (rounded; the method is the summary's ``energy_method``)."""
        return {"gpu": self.gpu, "samples": self.samples, "power_w_mean": _round(self.power_w_mean), "power_w_max": _round(self.power_w_max),
                "util_pct_mean": _round(self.util_pct_mean, 1), "mem_used_max_bytes": self.mem_used_max_bytes,
                "energy_j": _round(self.energy_j, 3)}


def gpu_summary(gpu: int, mine: list[Sample], start: Any, end: Any) -> GpuSummary:
    """One GPU's samples and its energy counter at start and end (mJ; anything else: no counter)."""
    if isinstance(start, int | float) and isinstance(end, int | float) and end >= start:
        energy: float | None = (end - start) / 1000.0
        method: str | None = "energy_counter"
    else:
        energy = _integrate_power(mine)
        method = "power_integral" if energy is not None else None
    powers = [r.power_w for r in mine if r.power_w is not None]
    utils = [r.util_gpu_pct for r in mine if r.util_gpu_pct is not None]
    mems = [r.mem_used_bytes for r in mine if r.mem_used_bytes is not None]
    return GpuSummary(gpu, len(mine), _mean(powers), max(powers, default=None), _mean(utils), max(mems, default=None), energy, method)


def _per_tick(rows: list[Sample]) -> tuple[int, list[float], list[float]]:
    """(ticks, the total power of each tick over the GPUs, the mean utilisation of each tick), ticks where a GPU had none left out."""
    ticks: dict[float, list[Sample]] = {}
    for row in rows:
        ticks.setdefault(row.time_s, []).append(row)
    total_power = [sum(r.power_w for r in tick if r.power_w is not None) for tick in ticks.values() if all(r.power_w is not None for r in tick)]
    mean_util = [sum(r.util_gpu_pct for r in tick if r.util_gpu_pct is not None) / len(tick) for tick in ticks.values()
                 if all(r.util_gpu_pct is not None for r in tick)]
    return len(ticks), total_power, mean_util


def summarize_samples(rows: list[Sample], duration_s: float, energy_start: dict[int, Any], energy_end: dict[int, Any],
                      facts: GpuFactsBlock, notes: list[str], interval_s: float, error: str | None = None,
                      csv_name: str | None = CSV_NAME, spans: Sequence[tuple[float, float]] = ()) -> TelemetrySummary:
    """The summary stored in run.json: per-tick totals over GPUs, then mean/max; energy in joules, and over
    ``spans`` (the timing phase, on the samples' clock) the steady window's length and energy."""
    gpus = sorted({row.gpu for row in rows} | set(energy_start))
    ticks, total_power, mean_util = _per_tick(rows)
    per_gpu = [gpu_summary(gpu, [r for r in rows if r.gpu == gpu], energy_start.get(gpu), energy_end.get(gpu)) for gpu in gpus]
    energies = [g.energy_j for g in per_gpu]
    energy_j = None if any(e is None for e in energies) else float(sum(e for e in energies if e is not None))
    methods = {g.method for g in per_gpu if g.method}
    throttles = sorted({name for r in rows for name in throttle_names(r.throttle_reasons)} - {"gpu_idle"})
    temps = [r.temperature_c for r in rows if r.temperature_c is not None]
    clocks = [r.sm_clock_mhz for r in rows if r.sm_clock_mhz is not None]
    notes_out = list(notes)
    window_s, steady_j = steady_energy(rows, gpus, spans)
    if spans and steady_j is None:
        notes_out.append("no steady-window energy: the samples do not cover the timing phase")
    if energy_j is None:
        notes_out.append("energy not available: the GPU reports neither an energy counter nor power")
    if error:
        notes_out.append(f"sampler stopped early: {error}")
    return TelemetrySummary(
        available=True, reason=None, csv=csv_name, interval_s=interval_s, duration_s=round(duration_s, 3), samples=ticks,
        gpus=tuple(gpus), power_w=(_round(_mean(total_power)), _round(max(total_power, default=None))),
        util_pct=(_round(_mean(mean_util), 1), _round(max(mean_util, default=None), 1)),
        mem_used_max_bytes=max((g.mem_used_max_bytes for g in per_gpu if g.mem_used_max_bytes is not None), default=None),
        temperature_max_c=max(temps, default=None), sm_clock_mean_mhz=_round(_mean(clocks), 1),
        throttle_reasons_seen=tuple(throttles), energy_j=_round(energy_j, 3) if gpus else None,
        energy_method=(methods.pop() if len(methods) == 1 else "mixed" if methods else None) if energy_j is not None else None,
        steady_window_s=_round(window_s, 3), steady_energy_j=_round(steady_j, 3),
        per_gpu=tuple(per_gpu), facts=facts, notes=tuple(notes_out))


def steady_energy(rows: list[Sample], gpus: Sequence[int], spans: Sequence[tuple[float, float]]) -> tuple[float | None, float | None]:
    """(the spans' total length, the GPUs' energy over them in joules): None, None without spans; the energy is
    None where any GPU's samples do not cover a span."""
    if not spans or not gpus:
        return None, None
    window = float(sum(end - start for start, end in spans))
    total = 0.0
    for gpu in gpus:
        mine = sorted((r for r in rows if r.gpu == gpu), key=lambda r: r.time_s)
        for span in spans:
            joules = span_energy(mine, span)
            if joules is None:
                return window, None
            total += joules
    return window, total


def span_energy(mine: list[Sample], span: tuple[float, float]) -> float | None:
    """One GPU's energy (J) over ``span``: its energy counter (mJ) interpolated at both ends, else the integral of
    its sampled power over the span; None where the samples (in time order) do not cover the span."""
    counter = [(r.time_s, float(r.energy_mj)) for r in mine if r.energy_mj is not None]
    start, end = span
    if len(counter) >= 2 and all(b[1] >= a[1] for a, b in itertools.pairwise(counter)):
        at_start, at_end = _interpolate(counter, start), _interpolate(counter, end)
        return None if at_start is None or at_end is None else (at_end - at_start) / 1000.0
    power = [(r.time_s, r.power_w) for r in mine if r.power_w is not None]
    at_start, at_end = _interpolate(power, start), _interpolate(power, end)
    if at_start is None or at_end is None:
        return None
    return _trapezoids([(start, at_start), *((t, p) for t, p in power if start < t < end), (end, at_end)])


def _interpolate(points: list[tuple[float, float]], at: float) -> float | None:
    """The value at ``at`` on the straight lines between ``points`` (time order); None outside them."""
    if len(points) < 2 or not points[0][0] <= at <= points[-1][0]:
        return None
    index = max(1, bisect.bisect_left([t for t, _ in points], at))
    (t0, v0), (t1, v1) = points[index - 1], points[index]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (at - t0) / (t1 - t0)


def _integrate_power(rows: list[Sample]) -> float | None:
    points = [(r.time_s, r.power_w) for r in rows if r.power_w is not None]
    return _trapezoids(points) if len(points) >= 2 else None


def _trapezoids(points: list[tuple[float, float]]) -> float:
    """The integral of (time, power) points in time order, by trapezoids."""
    return float(sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in itertools.pairwise(points)))
