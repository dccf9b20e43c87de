"""The summary (``summary.json``) as typed, frozen rows: what ``judge/summary.py`` makes and the reports read.

JSON only at the file boundary: ``to_json`` writes the document ``schemas/summary.schema.json`` describes,
``from_json`` reads a schema-valid one (older summaries without the later blocks read as None/empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from orchestrator.judge.record import STATUSES, Mismatch
from orchestrator.judge.stats import SampleSummary
from orchestrator.judge.trajectory import Verdict
from orchestrator.judge.trust import TrustWarning

GROUP_KEYS = ("engine", "precision", "path", "batch_per_device", "devices")


def _stats(doc: Mapping[str, Any] | None) -> SampleSummary | None:
    return SampleSummary.from_json(doc) if doc else None


def _stats_json(stats: SampleSummary | None) -> Mapping[str, Any] | None:
    return stats.to_json() if stats is not None else None


def _pair(value: Any) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if value else None


def _list(pair: tuple[float, float] | None) -> list[float] | None:
    return list(pair) if pair is not None else None


def _check_cell(row: Any) -> None:
    if (row.batch_per_device is not None and row.batch_per_device < 1) or (row.devices is not None and row.devices < 1):
        raise ValueError(f"{row.engine} {row.precision}: batch and devices are positive")


@dataclass(frozen=True)
class RunRow:
    """One run in the summary: its cell, status, throughput and the figures derived from its result and telemetry."""

    run_id: str
    engine: str
    precision: str
    path: str | None
    batch_per_device: int | None
    devices: int | None
    repeat: int | None
    status: str
    reason: str | None = None
    throughput: float | None = None
    apparent_throughput: float | None = None
    work_shortfall: str | None = None
    weight_change: float | None = None
    setup_s: float | None = None
    warmup_s: float | None = None
    samples: int | None = None
    energy_j: float | None = None
    energy_per_sample_j: float | None = None
    energy_scope: str | None = None  # steady: over the timing phase and its samples; process: the whole engine process
    power_w_mean: float | None = None
    gpu_util_pct_mean: float | None = None
    telemetry: str | None = None
    gmacs_per_sample: float | None = None
    flops_per_sample: float | None = None
    achieved_tflops: float | None = None
    peak_fraction: float | None = None
    warnings: tuple[TrustWarning, ...] = ()
    parity_warning: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"run {self.run_id}: status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.throughput is not None and self.status != "ok":
            raise ValueError(f"run {self.run_id}: a {self.status} run has no throughput")
        _check_cell(self)

    @property
    def group(self) -> tuple[Any, ...]:
        return tuple(getattr(self, key) for key in GROUP_KEYS)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunRow:
        names = {f.name for f in fields(cls)} - {"warnings"}
        warnings = tuple(TrustWarning(w["id"], w["message"]) for w in doc.get("warnings") or ())
        return cls(**{k: v for k, v in doc.items() if k in names}, warnings=warnings)

    def to_json(self) -> dict[str, Any]:
        doc = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("warnings", "parity_warning")}
        doc["warnings"] = [w.to_json() for w in self.warnings]
        if self.parity_warning is not None:
            doc["parity_warning"] = self.parity_warning
        return doc


@dataclass(frozen=True)
class ApparentGroup:
    """A group's invalid runs: their throughput as their engine counted it, and why it is not a measurement."""

    n: int
    throughput: SampleSummary | None
    reasons: tuple[str, ...]
    weight_change: float | None = None

    def __post_init__(self) -> None:
        if self.n < 1 or not self.reasons:
            raise ValueError("an apparent block has invalid runs and their reasons")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ApparentGroup:
        return cls(doc["n"], _stats(doc.get("throughput")), tuple(doc["reasons"]), doc.get("weight_change"))

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "throughput": _stats_json(self.throughput), "reasons": list(self.reasons), "weight_change": self.weight_change}


@dataclass(frozen=True)
class GroupRow:
    """One group (engine x precision x path x batch x devices): statistics over its valid repeats."""

    engine: str
    precision: str
    path: str
    batch_per_device: int
    devices: int
    n: int
    throughput: SampleSummary | None
    n_total: int | None = None
    setup_s: SampleSummary | None = None
    warmup_s: SampleSummary | None = None
    latency_ms: Mapping[str, float] | None = None
    energy_per_sample_j: SampleSummary | None = None
    power_w: SampleSummary | None = None
    achieved_tflops: float | None = None
    peak_fraction: float | None = None
    gmacs_per_sample: float | None = None
    time_to_train_h: float | None = None
    warnings: tuple[str, ...] = ()  # the tables' warnings column
    warning_ids: tuple[str, ...] = ()  # orchestrator.judge.trust.KINDS, one per warning
    apparent: ApparentGroup | None = None
    weight_change: float | None = None

    def __post_init__(self) -> None:
        if self.n < 0 or (self.n_total is not None and self.n > self.n_total):
            raise ValueError(f"group {self.label}: {self.n} valid of {self.n_total} runs")
        if (self.throughput is None) != (self.n == 0):
            raise ValueError(f"group {self.label}: statistics exactly when some run is valid")
        _check_cell(self)

    @property
    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, key) for key in GROUP_KEYS)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.precision} {self.path} b{self.batch_per_device} x{self.devices}"

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GroupRow:
        stats = {k: _stats(doc.get(k)) for k in ("throughput", "setup_s", "warmup_s", "energy_per_sample_j", "power_w")}
        plain = {k: doc.get(k) for k in ("n_total", "achieved_tflops", "peak_fraction", "gmacs_per_sample", "time_to_train_h",
                                         "weight_change")}
        return cls(**{k: doc[k] for k in (*GROUP_KEYS, "n")}, **stats, **plain,
                   latency_ms=dict(doc["latency_ms"]) if doc.get("latency_ms") else None,
                   warnings=tuple(doc.get("warnings") or ()), warning_ids=tuple(doc.get("warning_ids") or ()),
                   apparent=ApparentGroup.from_json(doc["apparent"]) if doc.get("apparent") else None)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {k: getattr(self, k) for k in GROUP_KEYS}
        doc.update(n=self.n, n_total=self.n_total, throughput=_stats_json(self.throughput), setup_s=_stats_json(self.setup_s),
                   warmup_s=_stats_json(self.warmup_s), latency_ms=dict(self.latency_ms) if self.latency_ms else None,
                   energy_per_sample_j=_stats_json(self.energy_per_sample_j), power_w=_stats_json(self.power_w),
                   achieved_tflops=self.achieved_tflops, peak_fraction=self.peak_fraction, gmacs_per_sample=self.gmacs_per_sample,
                   time_to_train_h=self.time_to_train_h, warnings=list(self.warnings), warning_ids=list(self.warning_ids),
                   apparent=self.apparent.to_json() if self.apparent else None, weight_change=self.weight_change)
        return doc


@dataclass(frozen=True)
class Ratio:
    """engine / baseline engine in one cell: the ratio of median throughputs, its interval and the test."""

    precision: str
    path: str | None
    batch_per_device: int | None
    devices: int | None
    engine: str
    baseline_engine: str
    ratio: float
    ci95: tuple[float, float] | None = None
    interval: str | None = None
    range: tuple[float, float] | None = None
    p_value: float | None = None
    significant: bool | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        if self.engine == self.baseline_engine:
            raise ValueError(f"a ratio of {self.engine} to itself")
        if not self.ratio > 0:
            raise ValueError(f"{self.engine} / {self.baseline_engine}: ratio {self.ratio} is not positive")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Ratio:
        return cls(doc["precision"], doc.get("path"), doc.get("batch_per_device"), doc.get("devices"), doc["engine"],
                   doc["baseline_engine"], doc["ratio"], _pair(doc.get("ci95")), doc.get("interval"), _pair(doc.get("range")),
                   doc.get("p_value"), doc.get("significant"), doc.get("note"))

    def to_json(self) -> dict[str, Any]:
        return {"precision": self.precision, "path": self.path, "batch_per_device": self.batch_per_device, "devices": self.devices,
                "engine": self.engine, "baseline_engine": self.baseline_engine, "ratio": self.ratio, "ci95": _list(self.ci95),
                "interval": self.interval, "range": _list(self.range), "p_value": self.p_value, "significant": self.significant,
                "note": self.note}


@dataclass(frozen=True)
class ScalingRow:
    """One device count of a strong-scaling cell against its 1-device run."""

    engine: str
    precision: str
    path: str | None
    batch_per_device: int
    devices: int
    throughput: float | None
    speedup: float | None
    efficiency: float | None
    batch_global: int | None = None
    n: int | None = None
    baseline_throughput: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    speedup_range: tuple[float, float] | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        _check_cell(self)
        if (self.speedup is None) != (self.efficiency is None):
            raise ValueError(f"{self.engine} x{self.devices}: a speedup and its efficiency come together")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ScalingRow:
        return cls(doc["engine"], doc["precision"], doc.get("path"), doc["batch_per_device"], doc["devices"], doc["throughput"],
                   doc["speedup"], doc["efficiency"], doc.get("batch_global"), doc.get("n"), doc.get("baseline_throughput"),
                   _pair(doc.get("speedup_ci95")), _pair(doc.get("speedup_range")), doc.get("note"))

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "precision": self.precision, "path": self.path, "batch_per_device": self.batch_per_device,
                "devices": self.devices, "batch_global": self.batch_global, "n": self.n, "throughput": self.throughput,
                "baseline_throughput": self.baseline_throughput, "speedup": self.speedup, "speedup_ci95": _list(self.speedup_ci95),
                "speedup_range": _list(self.speedup_range), "efficiency": self.efficiency, "note": self.note}


@dataclass(frozen=True)
class CrossFinding:
    """A run the cross-engine parity check made invalid, and the fields it disagreed on."""

    run_id: str
    engine: str
    mismatches: tuple[Mismatch, ...]

    def __post_init__(self) -> None:
        if not self.mismatches:
            raise ValueError(f"run {self.run_id}: a cross-engine finding has mismatches")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> CrossFinding:
        return cls(doc["run_id"], doc["engine"], tuple(Mismatch.from_json(m) for m in doc["mismatches"]))

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "engine": self.engine, "mismatches": [m.to_json() for m in self.mismatches]}


ENERGY_DEFINITION = ("GPU energy of the whole engine process (setup, warmup and steady state) "
                     "divided by the samples it processed")
STEADY_ENERGY_DEFINITION = ("GPU energy over the engine's timing phase (setup, compilation and warmup excluded) "
                            "divided by the samples of its timed steps")
MIXED_ENERGY_DEFINITION = (f"{STEADY_ENERGY_DEFINITION}; runs recorded without that phase (energy_scope process): "
                           f"{ENERGY_DEFINITION}")


@dataclass(frozen=True)
class TelemetryOverview:
    """Whether GPU telemetry and energy were available over the runs, and why not."""

    available: bool
    runs: int
    runs_with_energy: int
    reasons: tuple[str, ...] = ()
    energy_definition: str = ENERGY_DEFINITION

    def __post_init__(self) -> None:
        if not 0 <= self.runs_with_energy <= self.runs:
            raise ValueError(f"{self.runs_with_energy} runs with energy of {self.runs}")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TelemetryOverview:
        return cls(doc.get("available", False), doc.get("runs", 0), doc.get("runs_with_energy", 0), tuple(doc.get("reasons") or ()),
                   doc.get("energy_definition", ENERGY_DEFINITION))

    def to_json(self) -> dict[str, Any]:
        return {"available": self.available, "runs": self.runs, "runs_with_energy": self.runs_with_energy,
                "reasons": list(self.reasons), "energy_definition": self.energy_definition}


@dataclass(frozen=True)
class Summary:
    """An artifact's summary: every run's row, the groups' statistics, ratios, scaling and the parity verdicts."""

    scenario: str
    artifact_id: str
    smoke: bool
    runs: tuple[RunRow, ...]
    groups: tuple[GroupRow, ...]
    ratios: tuple[Ratio, ...]
    counts: Mapping[str, int]
    host: Mapping[str, Any] | None = None  # the host's facts (host/hostinfo.py): they differ by machine
    reference_engine: str | None = None
    scaling: tuple[ScalingRow, ...] | None = None  # None: a summary from before the block existed
    cross_engine_parity: tuple[CrossFinding, ...] | None = None
    numerical_parity: tuple[Verdict, ...] | None = None
    telemetry: TelemetryOverview | None = None
    max_batch: tuple[Mapping[str, Any], ...] | None = None  # the maxbatch/*/search.json documents, as written
    max_batch_warnings: tuple[str, ...] = ()  # why those maximal batches do not compare (judge/maxbatch_limits.py)
    schema_version: int = 1

    def __post_init__(self) -> None:
        if sum(self.counts.values()) != len(self.runs):
            raise ValueError(f"counts {dict(self.counts)} do not add up to the {len(self.runs)} runs")
        if len({row.run_id for row in self.runs}) != len(self.runs):
            raise ValueError("a run appears twice in the summary")

    @property
    def bad_runs(self) -> int:
        """Runs that neither succeeded nor were skipped."""
        return sum(n for status, n in self.counts.items() if status not in ("ok", "skipped"))

    def group(self, engine: str, precision: str, path: str, devices: int = 1) -> GroupRow | None:
        """The first group of ``engine`` in that cell."""
        return next((g for g in self.groups if (g.engine, g.precision, g.path, g.devices) == (engine, precision, path, devices)), None)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Summary:
        """The summary of a schema-valid ``summary.json``."""
        def rows(key: str, kind: Any) -> Any:
            return tuple(kind.from_json(item) for item in doc[key]) if doc.get(key) is not None else None

        return cls(
            scenario=doc["scenario"], artifact_id=doc["artifact_id"], smoke=doc["smoke"], runs=rows("runs", RunRow),
            groups=rows("groups", GroupRow), ratios=rows("ratios", Ratio), counts=dict(doc["counts"]),
            host=dict(doc["host"]) if doc.get("host") is not None else None, reference_engine=doc.get("reference_engine"),
            scaling=rows("scaling", ScalingRow), cross_engine_parity=rows("cross_engine_parity", CrossFinding),
            numerical_parity=rows("numerical_parity", Verdict),
            telemetry=TelemetryOverview.from_json(doc["telemetry"]) if doc.get("telemetry") is not None else None,
            max_batch=tuple(dict(m) for m in doc["max_batch"]) if doc.get("max_batch") is not None else None,
            max_batch_warnings=tuple(doc.get("max_batch_warnings") or ()),
            schema_version=doc["schema_version"],
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema_version": self.schema_version, "scenario": self.scenario, "artifact_id": self.artifact_id,
                               "smoke": self.smoke}
        if self.host is not None:
            doc["host"] = dict(self.host)
        doc.update(counts=dict(self.counts), runs=[r.to_json() for r in self.runs], groups=[g.to_json() for g in self.groups])
        optional = {"reference_engine": self.reference_engine, "ratios": [r.to_json() for r in self.ratios],
                    "scaling": self.scaling, "cross_engine_parity": self.cross_engine_parity,
                    "numerical_parity": self.numerical_parity, "telemetry": self.telemetry, "max_batch": self.max_batch}
        for key, value in optional.items():
            if key in ("reference_engine", "ratios"):
                doc[key] = value
            elif isinstance(value, tuple):
                doc[key] = [item if isinstance(item, Mapping) else item.to_json() for item in value]
            elif value is not None:
                doc[key] = value.to_json()  # type: ignore[union-attr]
        if self.max_batch_warnings:
            doc["max_batch_warnings"] = list(self.max_batch_warnings)
        return doc
