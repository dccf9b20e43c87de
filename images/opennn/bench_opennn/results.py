"""The driver's events as bench's result blocks: environment, work (read back from OpenNN) and measurements."""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path

from bench_engine.contract import ResultMeasurements, RunSpec, Window, steady_of
from bench_engine.report import (
    Environment,
    InitReadback,
    LossReadback,
    Observed,
    OptimizerReadback,
    PrecisionReport,
    Readback,
    Switch,
    Switches,
    Work,
)
from bench_engine.result import ENGINE_LIB_VERSION
from bench_opennn.events import DriverEvents
from bench_opennn.locate import sources
from bench_opennn.plan import Switches as Options

LOSS_STEPS = 20  # bench_engine.api.LOSS_STEPS: the first per-step losses a result keeps


def environment(cuda: bool, driver: Path | None, info: dict[str, str], events: DriverEvents) -> Environment:
    opennn = next(s for s in sources() if s.name == "opennn")
    gpu = events.applied.get("gpu")
    cuda_version = None
    if gpu and "CUDA " in gpu:
        cuda_version = gpu.rsplit("CUDA ", 1)[1].strip()
    return Environment(
        framework="OpenNN", framework_version=f"{opennn.commit[:8]} (dev branch, {opennn.upstream})",
        python=platform.python_version(), engine_version=ENGINE_LIB_VERSION, cuda=cuda_version, cudnn=None, driver=None,
        device_kind="cuda" if cuda else "cpu",
        devices=(gpu.split("  ")[0].strip(),) if gpu else (() if cuda else (platform.processor() or "cpu",)),
        extra={"driver": str(driver) if driver else None, "build": info,
               "optimizer_json": events.applied.get("optimizer_json"), "regularization": events.applied.get("regularization")},
    )


def precision_of(asked: str, cuda: bool, applied: dict[str, str]) -> PrecisionReport:
    """bench's precision name for what OpenNN read back (parity then refuses a mismatch); ``asked``: the spec's."""
    training = applied.get("training_type", "float32")
    tf32_matmul, tf32_conv = applied.get("tf32_matmul") == "1", applied.get("tf32_conv") == "1"
    if training == "bfloat16":
        name = "bf16"
    elif cuda:
        name = "tf32" if (tf32_matmul or tf32_conv) else "fp32"
    else:  # TF32 does not exist on a CPU: OpenNN's float32 is what fp32 and tf32 both mean there
        name = asked if asked in ("fp32", "tf32") else "fp32"
    return PrecisionReport(name, applied.get("observed_compute_dtype", training), applied.get("param_dtype", "float32"),
                           tf32_matmul, tf32_conv, loss_scaling=False)


def optimizations(switches: Options, applied: dict[str, str], issued_steps: int) -> Switches:
    out: Switches = {}
    armed = applied.get("graph_update_armed") == "1"
    execs = applied.get("graph_execs", "?")
    out["cuda_graph"] = Switch(switches.cuda_graph and armed and execs not in ("0", "?"),
                               f"{switches.notes.get('cuda_graph', '')}; update closure armed: {armed}; training graph execs: {execs}")
    out["gpu_resident_data"] = Switch(applied.get("gpu_resident") == "1", f"Dataset storage mode {applied.get('storage_mode', '?')}")
    if "conv_autotune" in applied:
        tuned = applied["conv_autotune"] == "1"
        cap = applied.get("conv_workspace_cap_bytes", "?")
        policy = "all built and timed (BuildPlanPolicy ALL)" if tuned and cap == "0" else "heuristic choice (HEURISTICS_CHOICE)"
        out["cudnn_autotune"] = Switch(tuned and cap == "0", f"cuDNN frontend plans: {policy}; workspace cap {cap} bytes "
                                       f"(set_conv_autotune={switches.conv_autotune}, set_conv_workspace_cap={switches.conv_workspace_cap})")
    warmup_s = applied.get("opennn_cuda_warmup_s", "0")
    out["opennn_cuda_warmup"] = Switch(switches.opennn_cuda_warmup and float(warmup_s) > 0,
                                       f"Optimizer::warmup_device_training, one step, weights restored, in setup: {warmup_s} s")
    out["reset_graphs_after_warmup"] = Switch(switches.reset_graphs_after_warmup,
                                              "drop the warmup's one-step graph before timing (Optimizer::train keeps it)")
    steps = applied.get("steps_applied", "-1")
    if steps not in ("-1", ""):
        out["optimizer_steps"] = Switch(int(steps) == issued_steps, f"Adam updates read back from OpenNN: {steps} for {issued_steps} steps issued")
    buffer, trainable = applied.get("parameter_buffer_floats"), applied.get("trainable_parameters")
    if buffer and trainable:
        padding = int(buffer) - int(trainable)
        out["parameter_buffer"] = Switch(True, f"{buffer} floats = {trainable} parameters + {padding} alignment padding "
                                               f"({applied.get('parameter_tensors', '?')} tensors, each 64-byte aligned)")
    return out


def optimizer_readback(spec: RunSpec, applied: dict[str, str]) -> OptimizerReadback | None:
    """docs/engine-contract.md's ``optimizer``, from OpenNN's objects: lr (and Adam's eps, the constant
    EPSILON) from the driver, betas / momentum from OpenNN's own to_JSON, weight decay from the loss's
    regularisation (L2 weight, 0 when none)."""
    values = applied.get("optimizer_values", "").split()
    numbers = dict(zip(values[::2], (float(v) for v in values[1::2]), strict=False))
    if "lr" not in numbers:
        return None  # the driver stopped before it built the optimizer
    try:
        serialised = json.loads(applied.get("optimizer_json") or "{}")
    except ValueError:
        serialised = {}
    asked = spec.parity.optimizer
    decay = float(asked.get("weight_decay") or 0.0) if applied.get("regularization") == "L2" else 0.0
    if "AdaptiveMomentEstimation" in serialised:
        adam = serialised["AdaptiveMomentEstimation"]
        return OptimizerReadback("adam", "opennn::AdaptiveMomentEstimation", numbers.get("lr"), decay,
                                 betas=(float(adam["Beta1"]), float(adam["Beta2"])), eps=numbers.get("eps"))
    if "StochasticGradientDescent" in serialised:
        sgd = serialised["StochasticGradientDescent"]
        return OptimizerReadback("sgd", "opennn::StochasticGradientDescent", numbers.get("lr"), decay,
                                 momentum=float(sgd.get("Momentum", "nan")), nesterov=sgd.get("Nesterov") in ("1", "true", "True"))
    return OptimizerReadback(asked["name"], "unknown", numbers.get("lr"), decay)


def readback(spec: RunSpec, events: DriverEvents, init_sha: str | None) -> Readback:
    """The read-back fields of docs/engine-contract.md, from what the driver reported."""
    applied = events.applied
    loss = applied.get("loss", "?")
    return Readback(
        mode=spec.parity.mode, arch=spec.parity.arch, num_classes=int(applied.get("num_classes", 0)),
        input_shape=tuple(int(x) for x in applied.get("input_shape", "0,0,0").split(",")),
        param_dtypes=(applied.get("param_dtype", "float32"),),
        # OpenNN's gradient buffer is the fp32 master (BackPropagation::gradient, Type::FP32) in every precision
        observed=Observed(applied.get("observed_compute_dtype", "float32"), "float32", applied.get("logits_dtype", "float32")),
        optimizer=optimizer_readback(spec, applied),
        loss=LossReadback("cross_entropy" if loss == "CrossEntropy" else loss, "opennn::Loss(Error::CrossEntropy)", "mean", 0.0),
        # shared: the hash of the weights read back from OpenNN after loading; else OpenNN's own initialiser
        init=InitReadback("shared", init_sha) if init_sha else InitReadback("framework", None),
        steps_per_dispatch=1,
    )


def block_losses(events: DriverEvents) -> list[float]:
    """The mean training loss of each block the driver ran, in order (NaN where the driver wrote a non-finite one).

    The driver's block loss is ``Loss::EvaluationResult::error`` of ``Optimizer::train_epoch`` over the
    block's batches: each step's error summed and divided by the number of steps (``average_epoch_metrics``)
    on the host loop, the device loop and the CUDA-graph epoch alike; the L2 term is not in it, as in the
    other engines' losses. So it is the block mean the contract asks for, over the harness's blocks
    (bench_opennn.plan writes bench_engine.harness.timing_blocks).
    """
    return [math.nan if block["loss"] is None else float(block["loss"]) for block in events.blocks]


def first_losses(events: DriverEvents) -> list[float]:
    """Per-step losses, where every block so far is one step (OpenNN averages a block's losses); else none."""
    first = []
    for block in events.blocks:
        if block["steps"] != 1 or block["loss"] is None or len(first) >= LOSS_STEPS:
            break
        first.append(block["loss"])
    total = sum(b["steps"] for b in events.blocks)
    return first if len(first) == min(LOSS_STEPS, total) else []


def work(spec: RunSpec, events: DriverEvents, cuda: bool, switches: Options, dataset: tuple[str, int],
         init_sha: str | None) -> Work:
    """The work block: read back from OpenNN, counted by OpenNN's optimizer where it keeps a count (Adam), else by the loop."""
    applied, parity = events.applied, spec.parity
    issued_steps = sum(b["steps"] for b in events.blocks)
    steps_applied = int(applied.get("steps_applied", "-1") or -1)
    resident = applied.get("gpu_resident") == "1"
    return Work.of(
        readback(spec, events, init_sha), trainable_parameters=int(applied["trainable_parameters"]),
        dataset_sha256=dataset[0], dataset_samples=dataset[1], batch_per_device=parity.batch.per_device,
        batch_global=parity.batch.per_device, world_size=1, drop_last=parity.batch.drop_last, epochs=len(events.epochs),
        steps=steps_applied if steps_applied >= 0 else issued_steps, samples=sum(b["samples"] for b in events.blocks),
        data_placement="device" if (resident or not cuda) else "host", precision=precision_of(parity.precision, cuda, applied),
        optimizations=optimizations(switches, applied, issued_steps),
    )


def measurements(spec: RunSpec, events: DriverEvents, setup_s: float) -> ResultMeasurements:
    """The measurements block, the windows capped as every result's."""
    warm = [b for b in events.blocks if b["warmup"]]
    windows = [Window(b["steps"], b["samples"], b["seconds"]) for b in events.blocks if not b["warmup"]]
    losses = [b["loss"] for b in events.blocks if b["loss"] is not None]
    measured = ResultMeasurements(
        setup_s=setup_s, warmup_s=sum(b["seconds"] for b in warm), warmup_steps=sum(b["steps"] for b in warm),
        epochs=tuple(events.epochs), steady=steady_of(windows)._asdict(), windows=tuple(windows), peak_memory_bytes=None,
        final_loss=events.final_loss if events.done else (losses[-1] if losses else None),
        loss_first=losses[0] if losses else None, losses=tuple(first_losses(events)),
        block_losses=tuple(block_losses(events)) if spec.parity.mode == "train" else (),
    )
    return measured.capped(spec.measurement.max_step_samples)
