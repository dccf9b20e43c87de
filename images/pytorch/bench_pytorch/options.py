"""The engine's switches: the spec's path and engine options resolved for one device."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.contract import Parity, RunSpec
from bench_engine.precision import PRECISIONS
from bench_engine.report import Switch, Switches
from bench_pytorch.optimizer import CLASS_NAMES

DEFAULT_COMPILE_MODE = "default"  # max-autotune* autotunes every conv: over 5 min for ResNet-50 on an H200
# compile modes whose inductor captures CUDA graphs itself (a capture cannot nest in ours)
INDUCTOR_GRAPH_MODES = ("reduce-overhead", "max-autotune")
AUTOTUNE_MODES = ("max-autotune", "max-autotune-no-cudagraphs")  # modes that tune Inductor's own kernels themselves
DEFAULT_GRAPH_WARMUP = 3  # side-stream iterations before capture (the PyTorch CUDA graph docs use 3)
DDP_GRAPH_WARMUP = 11
FP16_UNFUSED = ("fp16 loss scaling with the unfused {optimizer} reads GradScaler's found_inf on the host (.item()), "
                "which a CUDA graph cannot capture")  # eager DDP iterations PyTorch requires before capturing a DDP step


@dataclass
class OptimizationPlan:
    """What the workload will do, plus ``optimizations``: every switch, applied or not, and why."""

    cuda: bool
    channels_last: bool = False
    compile: bool = False
    compile_mode: str = DEFAULT_COMPILE_MODE
    cuda_graphs: bool = False
    graph_warmup_steps: int = DEFAULT_GRAPH_WARMUP
    fused_optimizer: bool = False
    capturable_optimizer: bool = False  # the optimizer is built for a captured step (Adam: capturable=True)
    cudnn_benchmark: bool = False
    freezing: bool = False  # inference: Inductor freezing (weights constant, BatchNorm folded into the convolutions)
    kernel_tuning: bool = False  # Inductor tunes its own Triton kernels' launch configurations (no template benchmarking)
    optimizations: Switches = field(default_factory=dict)

    def note(self, switch: str, applied: bool, detail: str) -> None:
        self.optimizations[switch] = Switch(bool(applied), detail)


def _choice(options: Mapping[str, Any], key: str, auto_value: bool) -> tuple[bool, str]:
    """Resolve an auto|true|false option; return the value and why it has it."""
    value = options.get(key, "auto")
    if value == "auto" or value is None:
        return auto_value, "auto"
    return bool(value), "option"


def resolve_plan(spec: RunSpec, cuda: bool) -> OptimizationPlan:
    """Turn the spec's path and engine options into a :class:`OptimizationPlan` for this device.

    Raises UnsupportedError for a combination of explicit options that cannot run (the
    orchestrator refuses the same ones up front from engine.yaml ``refuse``).
    """
    plan = OptimizationPlan(cuda=cuda)
    optimizer = CLASS_NAMES.get(spec.parity.optimizer.get("name", "sgd"), "SGD")
    if spec.path == "baseline":
        plan.note("channels_last", False, "baseline: NCHW (framework default)")
        plan.note("compile", False, "baseline: eager")
        plan.note("cuda_graphs", False, "baseline: eager launches")
        plan.note("fused_optimizer", False, f"baseline: {optimizer} with PyTorch's default implementation")
        plan.note("cudnn_benchmark", False, "baseline: framework default")
        plan.note("freezing", False, "baseline: eager")
        plan.note("inductor_kernel_tuning", False, "baseline: eager")
        return plan
    options = spec.engine_options
    plan.channels_last, why = _choice(options, "channels_last", cuda)
    plan.note("channels_last", plan.channels_last, f"{why}: {'NHWC' if plan.channels_last else 'NCHW'} on {'cuda' if cuda else 'cpu'}")
    _compile(plan, options)
    _kernel_tuning(plan, options)
    _freezing(plan, spec)
    _cuda_graphs(plan, spec)
    _fused_optimizer(plan, spec, optimizer)
    plan.cudnn_benchmark, why = _choice(options, "cudnn_benchmark", cuda)
    if plan.cudnn_benchmark and not cuda:
        plan.cudnn_benchmark = False
        plan.note("cudnn_benchmark", False, "cpu: no cuDNN")
    else:
        plan.note("cudnn_benchmark", plan.cudnn_benchmark, f"{why}: torch.backends.cudnn.benchmark={plan.cudnn_benchmark}")
    return plan


def _compile(plan: OptimizationPlan, options: Mapping[str, Any]) -> None:
    plan.compile, why = _choice(options, "compile", plan.cuda)
    plan.compile_mode = str(options.get("compile_mode") or DEFAULT_COMPILE_MODE)
    if plan.compile:
        plan.note("compile", True, f"{why}: torch.compile(mode={plan.compile_mode!r})")
    else:
        reason = "cpu: inductor compile of the model takes minutes on CPU" if why == "auto" and not plan.cuda else "off, eager model"
        plan.note("compile", False, f"{why}: {reason}")


def _kernel_tuning(plan: OptimizationPlan, options: Mapping[str, Any]) -> None:
    """Inductor's tuning of its own generated kernels (BatchNorm's reductions among them) without max-autotune's
    benchmarking of convolution and GEMM templates: the part of max-autotune's gain that session 20's profile found."""
    plan.kernel_tuning, why = _choice(options, "inductor_kernel_tuning", False)
    if plan.kernel_tuning and options.get("compile") is False:
        raise UnsupportedError("engine option inductor_kernel_tuning: true needs compile (it tunes Inductor's kernels)")
    if plan.compile and plan.compile_mode in AUTOTUNE_MODES:
        plan.kernel_tuning = False
        plan.note("inductor_kernel_tuning", True, f"compile_mode {plan.compile_mode!r} tunes Inductor's kernels itself")
    elif plan.kernel_tuning and not (plan.cuda and plan.compile):  # on a CPU: compile auto is off there
        plan.kernel_tuning = False
        plan.note("inductor_kernel_tuning", False, "cpu: Inductor's CPU kernels are C++, not tuned Triton launches")
    elif plan.kernel_tuning:
        plan.note("inductor_kernel_tuning", True, f"{why}: Inductor benchmarks every launch configuration of its "
                  "reduction and pointwise kernels at their first run, then refines their block sizes "
                  "(max_autotune_pointwise, coordinate_descent_tuning); convolutions and GEMMs keep ATen/cuDNN")
    else:
        because = " (an H100 measured 3.7% at 224x224 and nothing at 32x32, README)" if why == "auto" else ""
        plan.note("inductor_kernel_tuning", False, f"{why}: off{because}, the kernels' heuristic launch configurations")


def _freezing(plan: OptimizationPlan, spec: RunSpec) -> None:
    """Inference: Inductor freezing folds the constant weights (BatchNorm into the convolutions) into the compiled forward."""
    plan.freezing, why = _choice(spec.engine_options, "freezing", plan.cuda and plan.compile and spec.parity.mode == "infer")
    if plan.freezing and spec.parity.mode != "infer":
        raise UnsupportedError("engine option freezing: true applies to inference only (training updates the weights)")
    if plan.freezing and not plan.compile:
        raise UnsupportedError("engine option freezing: true needs compile (it is an Inductor pass)")
    if plan.freezing:
        plan.note("freezing", True, f"{why}: Inductor freezing, weights constant in the compiled forward, "
                                    "BatchNorm folded into the convolutions (one rounding less, the same math)")
    elif spec.parity.mode != "infer":
        plan.note("freezing", False, "training: the weights change every step")
    else:
        plan.note("freezing", False, f"{why}: {'off' if why == 'option' else 'needs compile on CUDA'}")


def _cuda_graphs(plan: OptimizationPlan, spec: RunSpec) -> None:
    options, cuda = spec.engine_options, plan.cuda
    plan.cuda_graphs, why = _choice(options, "cuda_graphs", cuda)
    plan.graph_warmup_steps = int(options.get("graph_warmup_steps", DEFAULT_GRAPH_WARMUP))
    if plan.cuda_graphs and not cuda:
        plan.cuda_graphs = False
        plan.note("cuda_graphs", False, "cpu: CUDA graphs need CUDA")
    elif plan.cuda_graphs and plan.compile and plan.compile_mode in INDUCTOR_GRAPH_MODES:
        plan.cuda_graphs = False
        plan.note("cuda_graphs", False, f"compile_mode {plan.compile_mode!r} captures its own CUDA graphs")
    elif plan.cuda_graphs and spec.parity.devices > 1 and spec.parity.mode == "train":
        _ddp_graphs(plan, spec.parity, why)
    elif plan.cuda_graphs:
        detail = f"{why}: whole step in one CUDA graph after {plan.graph_warmup_steps} side-stream warmup steps"
        plan.note("cuda_graphs", True, detail)
    else:
        plan.note("cuda_graphs", False, f"{why}: {'cpu: CUDA graphs need CUDA' if not cuda else 'off, one launch per kernel'}")


def _fused_optimizer(plan: OptimizationPlan, spec: RunSpec, optimizer: str) -> None:
    plan.fused_optimizer, why = _choice(spec.engine_options, "fused_optimizer", plan.cuda)
    _graph_safe_scaling(plan, spec.engine_options, spec.parity, optimizer)
    plan.capturable_optimizer = plan.cuda_graphs and spec.parity.mode == "train"
    kind = "fused" if plan.fused_optimizer else "default (not fused; foreach on CUDA)"
    detail = f"{why}: {optimizer} {kind} implementation"
    if plan.capturable_optimizer:
        detail += (", capturable=True (step counters on the device) for the CUDA graph" if optimizer == "Adam"
                   else "; SGD keeps no step counter, so the CUDA graph captures it as is")
    plan.note("fused_optimizer", plan.fused_optimizer, detail)


def _graph_safe_scaling(plan: OptimizationPlan, options: Mapping[str, Any], parity: Parity, optimizer: str) -> None:
    """fp16 loss scaling in a CUDA graph needs the fused optimizer: the unfused path makes GradScaler
    read found_inf on the host (``.item()``), which a capture cannot contain."""
    info = PRECISIONS.get(parity.precision)
    scaled = info is not None and info.loss_scaling
    if not (plan.cuda_graphs and not plan.fused_optimizer and scaled and parity.mode == "train"):
        return
    why = FP16_UNFUSED.format(optimizer=optimizer)
    if options.get("cuda_graphs") is True and options.get("fused_optimizer") is False:
        raise UnsupportedError(f"engine option cuda_graphs: true with fused_optimizer: false cannot run fp16: {why}")
    plan.cuda_graphs = False
    plan.note("cuda_graphs", False, f"auto: off, eager steps: {why} (fused_optimizer: true or auto captures it)")


def _ddp_graphs(plan: OptimizationPlan, parity: Parity, why: str) -> None:
    """CUDA graphs of a DDP step: 11+ eager DDP iterations first, the capture inside the warmup steps."""
    plan.graph_warmup_steps = max(plan.graph_warmup_steps, DDP_GRAPH_WARMUP)
    needed = plan.graph_warmup_steps + 1  # warmup iterations, then the captured step
    if not parity.batch.drop_last:
        plan.cuda_graphs = False
        plan.note("cuda_graphs", False, "data parallel with a kept partial batch: the odd-shaped eager DDP step cannot mix with a captured one")
        return
    if parity.warmup_steps < needed and why == "auto":
        plan.cuda_graphs = False
        plan.note("cuda_graphs", False, f"auto: a DDP step is captured after {plan.graph_warmup_steps} eager DDP iterations, "
                                        f"at step {needed}, past the run's {parity.warmup_steps} warmup steps (eager instead)")
        return
    detail = (f"{why}: whole DDP step (NCCL all-reduce included) in one CUDA graph; DDP built on the side stream, "
              f"{plan.graph_warmup_steps} eager DDP warmup iterations there, capture on the same stream, "
              "TORCH_NCCL_ASYNC_ERROR_HANDLING=0 (PyTorch's recipe for NCCL >= 2.9.6)")
    if parity.warmup_steps < needed:
        detail += f"; WARNING: the capture at step {needed} falls in the timed steady state ({parity.warmup_steps} warmup steps)"
    plan.note("cuda_graphs", True, detail)
