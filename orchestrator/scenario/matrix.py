"""Expand a scenario into run plans (engine x precision x path x batch x devices x repeat) and specs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench_engine.contract import Batch, DatasetRef, MeasurementPlan, Parity, RunSpec
from orchestrator.data import PreparedSplit
from orchestrator.engines.refusals import PlanFacts
from orchestrator.engines.registry import discover
from orchestrator.errors import BadInput
from orchestrator.model.layers import trainable_parameters
from orchestrator.scenario.bounds import check_matrix_size
from orchestrator.scenario.scenario import Scenario
from orchestrator.scenario.workload import Workload


@dataclass(frozen=True)
class RunPlan:
    """One cell of the matrix."""

    engine: str
    precision: str
    path: str
    batch: int
    devices: int
    repeat: int
    skip_reason: str | None = None

    @property
    def run_id(self) -> str:
        return f"{self.engine}-{self.precision}-{self.path}-b{self.batch}-d{self.devices}-r{self.repeat}"

    @property
    def group(self) -> tuple[str, str, str, int, int]:
        return (self.engine, self.precision, self.path, self.batch, self.devices)


def _select(axis: tuple[str, ...], chosen: list[str] | None, name: str) -> tuple[str, ...]:
    if not chosen:
        return axis
    unknown = [c for c in chosen if c not in axis]
    if unknown:
        raise BadInput(f"--{name}: {', '.join(map(str, unknown))} not in the scenario's matrix.{name} ({', '.join(map(str, axis))})")
    return tuple(a for a in axis if a in chosen)


def expand(scenario: Scenario, engines: list[str] | None = None, precisions: list[str] | None = None,
           repeats: int | None = None, devices: int | None = None) -> list[RunPlan]:
    """The run plans, repeats outermost so repeats of one cell are spread over the session."""
    matrix = scenario.matrix
    engine_axis = _select(matrix.engines, engines, "engines")
    precision_axis = _select(matrix.precisions, precisions, "precisions")
    device_axis = (devices,) if devices else matrix.devices
    check_matrix_size(matrix, str(scenario.source), repeats=repeats, engines=len(engine_axis),
                      precisions=len(precision_axis), devices_given=bool(devices))
    known = discover()
    plans = []
    for repeat in range(1, (repeats or matrix.repeats) + 1):
        for engine in engine_axis:
            for precision in precision_axis:
                skip = None
                if precision not in known[engine].precisions:
                    skip = f"engine '{engine}' does not support precision {precision}"
                for path in matrix.paths:
                    for batch in scenario.batch_sizes:
                        for count in device_axis:
                            plans.append(RunPlan(engine, precision, path, batch, count, repeat, skip))
    check_refusals(scenario, plans)
    return plans


def check_refusals(scenario: Scenario, plans: list[RunPlan]) -> None:
    """Refuse (BadInput, before anything runs) a plan whose engine options its engine.yaml ``refuse`` names."""
    known = discover()
    for plan in plans:
        if plan.skip_reason:
            continue
        facts = PlanFacts(options=dict(scenario.engine_block(plan.engine).options), precision=plan.precision,
                          optimizer=scenario.workload.optimizer.name, path=plan.path, mode=scenario.workload.mode)
        reason = known[plan.engine].refusal(facts)
        if reason is not None:
            raise BadInput(f"{scenario.source}: {reason}")


def build_spec(scenario: Scenario, plan: RunPlan, split: PreparedSplit, dataset_path: str, device: str,
               init: Mapping[str, Any] | None = None) -> RunSpec:
    """The run spec of one plan (schema-checked by the caller before it is written).

    ``init``: the spec's ``parity.init`` block (orchestrator.model.initweights.shared_init); None: framework.
    """
    workload = scenario.workload
    return RunSpec(
        schema_version=1, run_id=plan.run_id, scenario=scenario.name, engine=plan.engine, path=plan.path, device=device,
        smoke=scenario.smoke, repeat=plan.repeat, parity=_parity(scenario, plan, split, dataset_path, init),
        measurement=_measurement(scenario), engine_options=dict(scenario.engine_block(plan.engine).options),
        expected_parameters=trainable_parameters(workload.model.arch, workload.model.num_classes, workload.input.channels),
    )


def _schedule(workload: Workload, global_batch: int, samples: int) -> tuple[int, int]:
    """(epochs, steps per epoch) of the workload at ``global_batch``; BadInput when no step is left to measure."""
    epochs, per_epoch = workload.length(samples, global_batch)
    if per_epoch < 1:
        raise BadInput(f"workload.batch.size: global batch {global_batch} leaves no full step in {samples} samples")
    total = epochs * per_epoch
    if workload.warmup_steps >= total:
        raise BadInput(f"workload.warmup_steps: {workload.warmup_steps} warmup steps leave none of the {total} steps to measure")
    return epochs, per_epoch


def _parity(scenario: Scenario, plan: RunPlan, split: PreparedSplit, dataset_path: str, init: Mapping[str, Any] | None) -> Parity:
    """The spec's parity block: what every engine of the comparison does alike."""
    workload = scenario.workload
    global_batch = plan.batch * plan.devices
    epochs, per_epoch = _schedule(workload, global_batch, split.samples)
    return Parity(
        mode=workload.mode, arch=workload.model.arch, num_classes=workload.model.num_classes, input=workload.input,
        dataset=DatasetRef(split.name, dataset_path, split.sha256, split.samples, split.split, split.synthetic),
        batch=Batch(plan.batch, global_batch, workload.batch.drop_last),
        devices=plan.devices, epochs=epochs, steps_per_epoch=per_epoch, total_steps=epochs * per_epoch,
        optimizer=workload.optimizer.to_json(), loss=workload.loss, precision=plan.precision, seed=workload.seed,
        warmup_steps=workload.warmup_steps, data_placement=workload.data_placement, init=dict(init or {"mode": "framework"}),
    )


def _measurement(scenario: Scenario) -> MeasurementPlan:
    """The spec's measurement block: the scenario's, defaults filled in."""
    m = scenario.measurement
    return MeasurementPlan(window_steps=m.window_steps, timeout_s=m.timeout_s, max_step_samples=m.max_step_samples,
                           stall_s=m.stall_s, setup_stall_s=m.setup_stall_s)


def check_plans(scenario: Scenario, plans: list[RunPlan], split: PreparedSplit, device: str, before_search: bool = False) -> None:
    """Build and validate every plan's spec before anything runs: bad input fails here, not half-way.

    ``before_search``: a scenario with ``batch.max_search`` has no batch size yet; its plans are
    checked once the search has chosen one (the second call)."""
    if before_search and scenario.workload.batch.max_search:
        return
    from orchestrator.schemas import SchemaError, validate

    placeholder = {"mode": "shared", "file": "init.safetensors", "sha256": "0" * 64, "format": "bench-init-v1"}
    init = placeholder if scenario.workload.init == "shared" else None
    for plan in plans:
        if plan.skip_reason:
            continue
        try:
            validate(build_spec(scenario, plan, split, str(split.path), device, init).to_json(), "run-spec")
        except BadInput as exc:
            raise BadInput(f"run {plan.run_id}: {exc}") from None
        except SchemaError as exc:
            raise BadInput(f"run {plan.run_id}: spec {exc.where}: {exc.detail}") from None


def reference_engine(scenario: Scenario) -> str:
    """The engine cross-engine ratios are taken against: matrix.reference, default the first engine."""
    return scenario.matrix.reference_engine
