"""The engine contract as types: the run spec the orchestrator writes and the result an engine writes.

Both sides use these frozen dataclasses; the JSON Schemas (``schemas/run-spec.schema.json``,
``schemas/engine-result.schema.json``) stay the wire format and are checked by the orchestrator.
``from_json`` reads a schema-valid document, ``to_json`` writes the same document back. Blocks whose
content differs by engine (environment, work, optimizer, engine options) stay mappings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from bench_engine import schedule

# ----------------------------------------------------------------------------- the run spec


@dataclass(frozen=True)
class Geometry:
    height: int
    width: int
    channels: int

    @property
    def hwc(self) -> tuple[int, int, int]:
        return (self.height, self.width, self.channels)


@dataclass(frozen=True)
class DatasetRef:
    name: str
    path: str
    sha256: str
    samples: int
    split: str
    synthetic: bool | None = None  # absent from specs that do not say


@dataclass(frozen=True)
class Batch:
    per_device: int
    global_: int  # "global" in the document
    drop_last: bool


@dataclass(frozen=True)
class Parity:
    """What every engine of a comparison must do alike (the spec's ``parity`` block)."""

    mode: str
    arch: str
    num_classes: int
    input: Geometry
    dataset: DatasetRef
    batch: Batch
    devices: int
    epochs: int
    steps_per_epoch: int
    total_steps: int
    optimizer: Mapping[str, Any]
    loss: str
    precision: str
    seed: int
    warmup_steps: int
    data_placement: str
    init: Mapping[str, Any] | None = None

    def expected_samples(self) -> int:
        """Samples the run takes, every epoch counted, a kept partial batch at its size."""
        return self.epochs * schedule.epoch_samples(self.dataset.samples, self.batch.global_, self.steps_per_epoch)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Parity:
        batch, data = doc["batch"], doc["dataset"]
        return cls(
            mode=doc["mode"], arch=doc["model"]["arch"], num_classes=doc["model"]["num_classes"],
            input=Geometry(**doc["input"]),
            dataset=DatasetRef(data["name"], data["path"], data["sha256"], data["samples"], data["split"], data.get("synthetic")),
            batch=Batch(batch["per_device"], batch["global"], batch["drop_last"]),
            devices=doc["devices"], epochs=doc["epochs"], steps_per_epoch=doc["steps_per_epoch"], total_steps=doc["total_steps"],
            optimizer=dict(doc["optimizer"]), loss=doc["loss"], precision=doc["precision"], seed=doc["seed"],
            warmup_steps=doc["warmup_steps"], data_placement=doc["data_placement"],
            init=dict(doc["init"]) if doc.get("init") is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        data = {"name": self.dataset.name, "path": self.dataset.path, "sha256": self.dataset.sha256,
                "samples": self.dataset.samples, "split": self.dataset.split}
        if self.dataset.synthetic is not None:
            data["synthetic"] = self.dataset.synthetic
        doc: dict[str, Any] = {
            "mode": self.mode, "model": {"arch": self.arch, "num_classes": self.num_classes},
            "input": {"height": self.input.height, "width": self.input.width, "channels": self.input.channels},
            "dataset": data,
            "batch": {"per_device": self.batch.per_device, "global": self.batch.global_, "drop_last": self.batch.drop_last},
            "devices": self.devices, "epochs": self.epochs, "steps_per_epoch": self.steps_per_epoch, "total_steps": self.total_steps,
            "optimizer": dict(self.optimizer),
        }
        if self.init is not None:
            doc["init"] = dict(self.init)
        doc.update(loss=self.loss, precision=self.precision, seed=self.seed, warmup_steps=self.warmup_steps,
                   data_placement=self.data_placement)
        return doc


@dataclass(frozen=True)
class MeasurementPlan:
    """How the harness times the run (the spec's ``measurement`` block)."""

    window_steps: int
    timeout_s: float
    max_step_samples: int
    stall_s: float | None = None
    setup_stall_s: float | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MeasurementPlan:
        return cls(doc["window_steps"], doc["timeout_s"], doc["max_step_samples"], doc.get("stall_s"), doc.get("setup_stall_s"))

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"window_steps": self.window_steps, "timeout_s": self.timeout_s}
        for key in ("stall_s", "setup_stall_s"):
            if getattr(self, key) is not None:
                doc[key] = getattr(self, key)
        doc["max_step_samples"] = self.max_step_samples
        return doc


@dataclass(frozen=True)
class RunSpec:
    """One run of one engine: the document ``<engine> --spec SPEC.json`` reads."""

    schema_version: int
    run_id: str
    scenario: str
    engine: str
    path: str
    device: str
    smoke: bool
    repeat: int
    parity: Parity
    measurement: MeasurementPlan
    engine_options: Mapping[str, Any]
    expected_parameters: int | None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunSpec:
        return cls(
            schema_version=doc["schema_version"], run_id=doc["run_id"], scenario=doc["scenario"], engine=doc["engine"],
            path=doc["path"], device=doc["device"], smoke=doc["smoke"], repeat=doc["repeat"],
            parity=Parity.from_json(doc["parity"]), measurement=MeasurementPlan.from_json(doc["measurement"]),
            engine_options=dict(doc["engine_options"]), expected_parameters=doc["expected"]["trainable_parameters"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version, "run_id": self.run_id, "scenario": self.scenario, "engine": self.engine,
            "path": self.path, "device": self.device, "smoke": self.smoke, "repeat": self.repeat,
            "parity": self.parity.to_json(), "measurement": self.measurement.to_json(),
            "engine_options": dict(self.engine_options), "expected": {"trainable_parameters": self.expected_parameters},
        }

    @property
    def schedule(self) -> schedule.Schedule:
        """What the harness's step schedule reads of this spec."""
        parity = self.parity
        return schedule.Schedule(parity.batch.per_device, parity.steps_per_epoch, parity.epochs, parity.warmup_steps,
                                 self.measurement.window_steps)

    def init_file(self, spec_dir: str | Path | None = None) -> Path | None:
        """The initial-weights file of a ``shared`` spec (relative to ``spec_dir``), or None for ``framework``."""
        init = self.parity.init or {"mode": "framework"}
        if init["mode"] != "shared":
            return None
        path = Path(init["file"])
        return Path(spec_dir) / path if spec_dir is not None and not path.is_absolute() else path

    def with_init_relative_to(self, spec_dir: str | Path) -> RunSpec:
        """This spec with a relative shared initial-weights file made absolute against ``spec_dir``."""
        path = self.init_file(spec_dir)
        if path is None or self.parity.init is None:
            return self
        return replace(self, parity=replace(self.parity, init={**self.parity.init, "file": str(path)}))


# ----------------------------------------------------------------------------- the engine result


class Window(NamedTuple):
    """Steps the harness issued between two synchronised clock reads; ``[steps, samples, seconds]`` on the wire."""

    steps: int
    samples: int
    seconds: float

    def to_json(self) -> list[float]:
        return [self.steps, self.samples, self.seconds]


def thin(windows: Sequence[Any], limit: int) -> list[Any]:
    """At most ``limit`` of ``windows``, evenly spaced: what a result file keeps of a long run's windows."""
    if len(windows) <= limit:
        return list(windows)
    stride = len(windows) / limit
    return [windows[int(i * stride)] for i in range(limit)]


class Steady(NamedTuple):
    """Steady-state totals (the result's ``measurements.steady``; ``_asdict()`` is the document)."""

    steps: int
    samples: int
    time_s: float
    throughput: float | None


def steady_of(windows: Sequence[Sequence[float]]) -> Steady:
    """Steady-state totals of timing windows ``[steps, samples, seconds]``."""
    steps = int(sum(w[0] for w in windows))
    samples = int(sum(w[1] for w in windows))
    seconds = float(sum(w[2] for w in windows))
    return Steady(steps, samples, seconds, (samples / seconds) if seconds > 0 else None)


def latency_of(windows: Sequence[Sequence[float]]) -> dict[str, float] | None:
    """Per-batch latency percentiles (ms) from the windows of one step each (inference)."""
    per_step = [w[2] / w[0] * 1000.0 for w in windows if w[0] == 1]
    if not per_step:
        return None
    import numpy as np

    values = np.asarray(per_step)
    out = {"mean": float(values.mean())}
    out.update({f"p{q}": float(np.percentile(values, q)) for q in (50, 90, 95, 99)})
    out.update(min=float(values.min()), max=float(values.max()))
    return out


@dataclass(frozen=True)
class ResultMeasurements:
    """The result's ``measurements`` block: setup and warmup apart from the steady-state windows."""

    setup_s: float
    warmup_s: float
    warmup_steps: int
    steady: Mapping[str, Any]  # totals of every window, also after the file's windows were thinned
    epochs: tuple[Mapping[str, Any], ...] = ()
    windows: tuple[Window, ...] = ()
    latency_ms: Mapping[str, float] | None = None
    peak_memory_bytes: int | None = None
    memory_limit_bytes: int | None = None  # the allocator's limit, read back from the framework (where it says)
    final_loss: float | None = None
    loss_first: float | None = None
    losses: tuple[float, ...] = ()
    block_losses: tuple[float, ...] = ()  # the mean training loss of each harness block, in order
    workers: tuple[Mapping[str, Any], ...] | None = None
    # where the setup went, in order: before_s (interpreter and bench_engine start), environment_s (the framework's
    # import and device facts), dataset_s (mapping the split, copying out what the steps read), prepare_s (model,
    # weights, data placement), hash_wait_s (waiting for the split's hash, read on a thread since the start);
    # hash_s: that hash's own time, overlapped, outside the sum
    setup_parts: Mapping[str, float] | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ResultMeasurements:
        return cls(
            setup_s=doc["setup_s"], warmup_s=doc["warmup_s"], warmup_steps=doc["warmup_steps"], steady=dict(doc["steady"]),
            epochs=tuple(dict(e) for e in doc.get("epochs") or ()), windows=tuple(Window(*w) for w in doc.get("windows") or ()),
            latency_ms=doc.get("latency_ms"), peak_memory_bytes=doc.get("peak_memory_bytes"),
            memory_limit_bytes=doc.get("memory_limit_bytes"), final_loss=doc.get("final_loss"),
            loss_first=doc.get("loss_first"), losses=tuple(doc.get("losses") or ()),
            block_losses=tuple(doc.get("block_losses") or ()),
            workers=tuple(dict(w) for w in doc["workers"]) if doc.get("workers") is not None else None,
            setup_parts=dict(doc["setup_parts"]) if doc.get("setup_parts") is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "setup_s": self.setup_s, "warmup_s": self.warmup_s, "warmup_steps": self.warmup_steps,
            "epochs": [dict(e) for e in self.epochs], "steady": dict(self.steady), "windows": [w.to_json() for w in self.windows],
            "peak_memory_bytes": self.peak_memory_bytes, "final_loss": self.final_loss, "loss_first": self.loss_first,
            "losses": list(self.losses),
        }
        if self.memory_limit_bytes is not None:
            doc["memory_limit_bytes"] = self.memory_limit_bytes
        if self.block_losses:
            doc["block_losses"] = list(self.block_losses)
        if self.latency_ms is not None:
            doc["latency_ms"] = dict(self.latency_ms)
        if self.workers is not None:
            doc["workers"] = [dict(w) for w in self.workers]
        if self.setup_parts is not None:
            doc["setup_parts"] = dict(self.setup_parts)
        return doc

    def capped(self, limit: int) -> ResultMeasurements:
        """At most ``limit`` timing windows kept, evenly spaced (``steady`` still totals them all)."""
        return replace(self, windows=tuple(thin(self.windows, limit)))

    @classmethod
    def merge(cls, ranks: Sequence[ResultMeasurements], offsets: Sequence[float], rank_ids: Sequence[int]) -> ResultMeasurements:
        """One run's measurements from its workers' (one per device): every time is the slowest worker's.

        ``offsets``: seconds from the launcher's start to each worker's start (added to its setup).
        The workers must have timed the same windows (steps and samples); each is reported in ``workers``.
        ``block_losses``: per block, the mean over the workers (each rank's mean loss of its equal share,
        or already the global one: the mean leaves equal values as they are).
        """
        if len({len(m.windows) for m in ranks}) != 1:
            raise RuntimeError(f"workers timed different numbers of windows: {sorted({len(m.windows) for m in ranks})}")
        windows = []
        for parts in zip(*(m.windows for m in ranks), strict=True):
            if len({(w.steps, w.samples) for w in parts}) != 1:
                raise RuntimeError(f"workers disagree on a timing window: {[w.to_json() for w in parts]}")
            windows.append(Window(parts[0].steps, parts[0].samples, max(w.seconds for w in parts)))
        epochs = tuple({**parts[0], "time_s": max(e["time_s"] for e in parts)} for parts in zip(*(m.epochs for m in ranks), strict=True))
        if len({len(m.block_losses) for m in ranks}) != 1:
            raise RuntimeError(f"workers reported different numbers of block losses: {sorted({len(m.block_losses) for m in ranks})}")
        block_losses = tuple(sum(parts) / len(parts) for parts in zip(*(m.block_losses for m in ranks), strict=True))
        peaks = [m.peak_memory_bytes for m in ranks if m.peak_memory_bytes is not None]
        limits = [m.memory_limit_bytes for m in ranks if m.memory_limit_bytes is not None]
        workers = tuple({"rank": rank, "setup_s": m.setup_s + offset, "warmup_s": m.warmup_s, "steady_time_s": steady_of(m.windows).time_s,
                         "peak_memory_bytes": m.peak_memory_bytes} for rank, m, offset in zip(rank_ids, ranks, offsets, strict=True))
        return replace(
            ranks[0],
            setup_s=max(m.setup_s + offset for m, offset in zip(ranks, offsets, strict=True)),
            warmup_s=max(m.warmup_s for m in ranks), epochs=epochs, windows=tuple(windows), steady=steady_of(windows)._asdict(),
            latency_ms=latency_of(windows), peak_memory_bytes=max(peaks) if peaks else None,
            memory_limit_bytes=min(limits) if limits else None, workers=workers,
            block_losses=block_losses,
        )


@dataclass(frozen=True)
class EngineResult:
    """The document an engine writes for one run (``--result RESULT.json``)."""

    schema_version: int
    run_id: str
    engine: str
    status: str
    environment: Mapping[str, Any]
    work: Mapping[str, Any] | None = None
    measurements: ResultMeasurements | None = None
    failure: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys outside the contract (a worker's own block)

    KEYS = ("schema_version", "run_id", "engine", "status", "failure", "environment", "work", "measurements")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> EngineResult:
        measurements = doc.get("measurements")
        return cls(
            schema_version=doc["schema_version"], run_id=doc["run_id"], engine=doc["engine"], status=doc["status"],
            environment=dict(doc["environment"]), work=dict(doc["work"]) if doc.get("work") is not None else None,
            measurements=ResultMeasurements.from_json(measurements) if measurements is not None else None,
            failure=dict(doc["failure"]) if doc.get("failure") is not None else None,
            extra={k: v for k, v in doc.items() if k not in cls.KEYS},
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema_version": self.schema_version, "run_id": self.run_id, "engine": self.engine, "status": self.status}
        if self.failure is not None:
            doc["failure"] = dict(self.failure)
        doc["environment"] = dict(self.environment)
        if self.work is not None:
            doc["work"] = dict(self.work)
        if self.measurements is not None:
            doc["measurements"] = self.measurements.to_json()
        doc.update(self.extra)
        return doc

    @classmethod
    def merge(cls, ranks: Sequence[EngineResult], offsets: Sequence[float], rank_ids: Sequence[int]) -> EngineResult:
        """The single result of a run whose workers all finished ok (in rank order): rank 0's document with the
        slowest worker's times; the workers must agree on the work they counted."""
        works = [r.work or {} for r in ranks]
        for key in ("steps", "samples", "epochs", "batch_global", "world_size"):
            values = {w.get(key) for w in works}
            if len(values) != 1:
                raise RuntimeError(f"workers disagree on {key}: {sorted(values, key=str)}")
        if any(r.measurements is None for r in ranks):
            raise RuntimeError("a worker wrote no measurements")
        merged = ResultMeasurements.merge([r.measurements for r in ranks], offsets, rank_ids)  # type: ignore[misc]
        return replace(ranks[0], measurements=merged, extra={})
