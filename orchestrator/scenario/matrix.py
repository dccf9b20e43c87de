"""Expand a scenario into run plans (engine x precision x path x batch x devices x repeat) and specs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench_engine.contract import Batch, DatasetRef, Geometry, MeasurementPlan, Parity, RunSpec
from bench_engine.schedule import steps_per_epoch
from orchestrator.data import PreparedSplit
from orchestrator.engines.refusals import PlanFacts
from orchestrator.engines.registry import discover
from orchestrator.errors import BadInput
from orchestrator.model.initweights import init_mode
from orchestrator.model.layers import trainable_parameters
from orchestrator.scenario.bounds import check_matrix_size
from orchestrator.scenario.load import Scenario

ADAM_BETAS = (0.9, 0.999)  # torch.optim.Adam / optax.adam / keras Adam defaults
ADAM_EPS = 1e-8  # torch and optax (keras defaults to 1e-7: the engines set it from the spec)
DEFAULT_MEASUREMENT = {"window_steps": 10, "timeout_s": 3600.0, "max_step_samples": 20000, "stall_s": 300.0, "setup_stall_s": 900.0}


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


def _select(axis: list[Any], chosen: list[Any] | None, name: str) -> list[Any]:
    if not chosen:
        return axis
    unknown = [c for c in chosen if c not in axis]
    if unknown:
        raise BadInput(f"--{name}: {', '.join(map(str, unknown))} not in the scenario's matrix.{name} ({', '.join(map(str, axis))})")
    return [a for a in axis if a in chosen]


def expand(scenario: Scenario, engines: list[str] | None = None, precisions: list[str] | None = None,
           repeats: int | None = None, devices: int | None = None) -> list[RunPlan]:
    """The run plans, repeats outermost so repeats of one cell are spread over the session."""
    matrix, workload = scenario.matrix, scenario.workload
    engine_axis = _select(matrix["engines"], engines, "engines")
    precision_axis = _select(matrix["precisions"], precisions, "precisions")
    paths = matrix.get("paths") or ["optimized"]
    batches = matrix.get("batch_sizes") or [workload["batch"]["size"]]
    device_axis = [devices] if devices else (matrix.get("devices") or [1])
    check_matrix_size(matrix, str(scenario.source), repeats=repeats, engines=len(engine_axis),
                      precisions=len(precision_axis), devices_given=bool(devices))
    known = discover()
    plans = []
    for repeat in range(1, (repeats or matrix.get("repeats") or 1) + 1):
        for engine in engine_axis:
            for precision in precision_axis:
                skip = None
                if precision not in known[engine].precisions:
                    skip = f"engine '{engine}' does not support precision {precision}"
                for path in paths:
                    for batch in batches:
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
        facts = PlanFacts(options=scenario.engine_block(plan.engine).get("options") or {}, precision=plan.precision,
                          optimizer=scenario.workload["optimizer"]["name"], path=plan.path, mode=scenario.workload["mode"])
        reason = known[plan.engine].refusal(facts)
        if reason is not None:
            raise BadInput(f"{scenario.source}: {reason}")


def optimizer_block(optimizer: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's optimizer: every hyper-parameter of the named optimizer, defaults filled in."""
    if optimizer["name"] == "adam":
        return {"name": "adam", "lr": optimizer["lr"], "betas": list(optimizer.get("betas", ADAM_BETAS)),
                "eps": optimizer.get("eps", ADAM_EPS), "weight_decay": optimizer.get("weight_decay", 0.0)}
    return {"name": optimizer["name"], "lr": optimizer["lr"], "momentum": optimizer.get("momentum", 0.0),
            "weight_decay": optimizer.get("weight_decay", 0.0), "nesterov": optimizer.get("nesterov", False)}


def build_spec(scenario: Scenario, plan: RunPlan, split: PreparedSplit, dataset_path: str, device: str,
               init: Mapping[str, Any] | None = None) -> RunSpec:
    """The run spec of one plan (schema-checked by the caller before it is written).

    ``init``: the spec's ``parity.init`` block (orchestrator.model.initweights.shared_init); None: framework.
    """
    workload = scenario.workload
    model = workload["model"]
    return RunSpec(
        schema_version=1, run_id=plan.run_id, scenario=scenario.name, engine=plan.engine, path=plan.path, device=device,
        smoke=scenario.smoke, repeat=plan.repeat, parity=_parity(scenario, plan, split, dataset_path, init),
        measurement=_measurement(scenario), engine_options=dict(scenario.engine_block(plan.engine).get("options") or {}),
        expected_parameters=trainable_parameters(model["arch"], model["num_classes"], workload["input"]["channels"]),
    )


def _schedule(workload: Mapping[str, Any], global_batch: int, samples: int) -> tuple[int, int]:
    """(epochs, steps per epoch) of the workload at ``global_batch``; BadInput when no step is left to measure."""
    if "steps" in workload:
        epochs, per_epoch = 1, workload["steps"]
    else:
        epochs, per_epoch = workload["epochs"], steps_per_epoch(samples, global_batch, workload["batch"].get("drop_last", True))
    if per_epoch < 1:
        raise BadInput(f"workload.batch.size: global batch {global_batch} leaves no full step in {samples} samples")
    total = epochs * per_epoch
    if workload["warmup_steps"] >= total:
        raise BadInput(f"workload.warmup_steps: {workload['warmup_steps']} warmup steps leave none of the {total} steps to measure")
    return epochs, per_epoch


def _parity(scenario: Scenario, plan: RunPlan, split: PreparedSplit, dataset_path: str, init: Mapping[str, Any] | None) -> Parity:
    """The spec's parity block: what every engine of the comparison does alike."""
    workload = scenario.workload
    global_batch = plan.batch * plan.devices
    epochs, per_epoch = _schedule(workload, global_batch, split.samples)
    return Parity(
        mode=workload["mode"], arch=workload["model"]["arch"], num_classes=workload["model"]["num_classes"],
        input=Geometry(workload["input"]["height"], workload["input"]["width"], workload["input"]["channels"]),
        dataset=DatasetRef(split.name, dataset_path, split.sha256, split.samples, split.split, split.synthetic),
        batch=Batch(plan.batch, global_batch, workload["batch"].get("drop_last", True)),
        devices=plan.devices, epochs=epochs, steps_per_epoch=per_epoch, total_steps=epochs * per_epoch,
        optimizer=optimizer_block(workload["optimizer"]), loss=workload["loss"], precision=plan.precision, seed=workload["seed"],
        warmup_steps=workload["warmup_steps"], data_placement=workload.get("data_placement", "device"),
        init=dict(init or {"mode": "framework"}),
    )


def _measurement(scenario: Scenario) -> MeasurementPlan:
    """The spec's measurement block: the scenario's, defaults filled in."""
    measurement = {**DEFAULT_MEASUREMENT, **scenario.measurement}
    return MeasurementPlan(window_steps=measurement["window_steps"], timeout_s=float(measurement["timeout_s"]),
                           max_step_samples=measurement["max_step_samples"], stall_s=float(measurement["stall_s"]),
                           setup_stall_s=float(measurement["setup_stall_s"]))


def check_plans(scenario: Scenario, plans: list[RunPlan], split: PreparedSplit, device: str, before_search: bool = False) -> None:
    """Build and validate every plan's spec before anything runs: bad input fails here, not half-way.

    ``before_search``: a scenario with ``batch.max_search`` has no batch size yet; its plans are
    checked once the search has chosen one (the second call)."""
    if before_search and scenario.workload["batch"].get("max_search"):
        return
    from orchestrator.schemas import SchemaError, validate

    placeholder = {"mode": "shared", "file": "init.safetensors", "sha256": "0" * 64, "format": "bench-init-v1"}
    init = placeholder if init_mode(scenario.workload) == "shared" else None
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
    return scenario.matrix.get("reference") or scenario.matrix["engines"][0]
