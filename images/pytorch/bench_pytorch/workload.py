"""Building the PyTorch workload of a run spec: model, precision, optimizer, data, step runner
(one rank of a DistributedDataParallel run when the spec has several devices)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bench_engine.api import LOSS_STEPS, StepBatch, UnsupportedError, Workload
from bench_engine.contract import RunSpec
from bench_engine.data import Dataset, check_dataset
from bench_engine.report import Readback
from bench_engine.setupclock import SetupClock
from bench_engine.shards import ShardPlan, plan_shards, shard_dataset
from bench_engine.weights import WeightChange
from bench_pytorch.batches import BatchSource
from bench_pytorch.distributed import DistContext, init_process_group, require_worker, wrap_ddp
from bench_pytorch.model import build_model, trainable_parameters
from bench_pytorch.optimizer import OptimizerSettings, make_optimizer
from bench_pytorch.options import OptimizationPlan, resolve_plan
from bench_pytorch.precision import Precision, apply_precision
from bench_pytorch.readback import load_shared_init, loss_readback, optimizer_readback, param_dtypes, traced_step
from bench_pytorch.step import EagerRunner, GraphRunner, StepFn, TrainParts, build_infer_step, build_train_step, without_autotune

Runner = EagerRunner | GraphRunner

# set when a rank abandoned a hung process-group teardown: the entrypoint then exits without interpreter shutdown
TEARDOWN_ABANDONED = False


class TorchWorkload(Workload):
    """Runs the step runner per batch; keeps the last loss as a tensor until asked for it.

    Data parallel (``dist`` set): every step is a global batch; this rank runs its share of it,
    taken from its compact shard (``shards``), and the loss it reports is the mean over ranks.
    """

    def __init__(self, runner: Runner, device: torch.device, training: bool, shards: ShardPlan | None = None,
                 dist: DistContext | None = None, loss_sum: torch.Tensor | None = None,
                 parameters: list[torch.Tensor] | None = None, compiled: bool = False, **fields: Any) -> None:
        super().__init__(**fields)
        self._compile_unsaid = compiled  # say what torch.compile spent once, after the first block (the warmup)
        # the trainable parameters and a copy of their values after loading (on the device; not timed)
        self.parameters = parameters or []
        self._initial = [p.detach().clone() for p in self.parameters] if training else []
        self.runner, self.device, self.training = runner, device, training
        self.shards, self.dist = shards, dist
        self._last: torch.Tensor | None = None
        self._history: list[torch.Tensor] = []  # the first LOSS_STEPS losses, still on the device
        self.loss_sum = loss_sum  # the step adds every loss here (TrainParts.loss_sum)
        self._block_sums: list[torch.Tensor] = []  # each block's loss sum, still on the device
        self._block_steps: list[int] = []
        self._steps_in_block = 0

    def step(self, batch: StepBatch) -> None:
        self._last = self.runner(self.shards.local(batch) if self.shards is not None else batch)
        self._steps_in_block += 1
        if self.training and len(self._history) < LOSS_STEPS:
            self._history.append(self._last.detach().float().clone())  # a graph's output buffer is overwritten

    def block_done(self) -> None:
        """Move the block's loss sum aside and zero the accumulator: two queued device ops, no wait."""
        if self.training and self.loss_sum is not None:
            self._block_sums.append(self.loss_sum.clone())
            self.loss_sum.zero_()
            self._block_steps.append(self._steps_in_block)
        self._steps_in_block = 0
        if self._compile_unsaid:
            self._compile_unsaid = False
            from bench_engine.result import log
            from bench_pytorch.compile_report import compile_summary

            line = compile_summary()
            if line:
                log(line)

    def block_losses(self) -> list[float]:
        if not self._block_sums:
            return []
        sums = torch.stack(self._block_sums)
        if self.dist is not None:  # each rank's sum of its shard losses: the mean over ranks is the global one
            from bench_pytorch.distributed import mean_over_ranks

            sums = mean_over_ranks(sums)
        return [float(total) / steps if steps else float("nan") for total, steps in zip(sums.cpu(), self._block_steps, strict=True)]

    def losses(self) -> list[float]:
        if not self._history:
            return []
        stacked = torch.stack(self._history)
        if self.dist is not None:
            from bench_pytorch.distributed import mean_over_ranks

            stacked = mean_over_ranks(stacked)
        return [float(v) for v in stacked.cpu()]

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def loss(self) -> float | None:
        if not self.training or self._last is None:
            return None
        if self.dist is not None:
            from bench_pytorch.distributed import mean_over_ranks

            return float(mean_over_ranks(self._last))
        return float(self._last)

    def close(self) -> None:
        """Release the CUDA graph, then leave the process group (bounded: see ``distributed.shutdown``)."""
        if isinstance(self.runner, GraphRunner):
            self.runner.release()
        if self.dist is not None:
            from bench_pytorch.distributed import TEARDOWN_TIMEOUT_S, shutdown

            if not shutdown():
                global TEARDOWN_ABANDONED
                TEARDOWN_ABANDONED = True
                print(f"[bench-engine] rank {self.dist.rank}: leaving the process group did not finish in "
                      f"{TEARDOWN_TIMEOUT_S:.0f} s; abandoned (the measurements are complete)", file=sys.stderr, flush=True)

    def weight_change(self) -> WeightChange | None:
        """||w_end - w_0|| over the trainable parameters, summed in float64 on the device."""
        if not self._initial:
            return None
        with torch.no_grad():  # one read of the device: both sums stacked
            moved_sq = torch.stack([((p.double() - p0.double()) ** 2).sum() for p, p0 in zip(self.parameters, self._initial, strict=True)]).sum()
            start_sq = torch.stack([(p0.double() ** 2).sum() for p0 in self._initial]).sum()
            moved, start = (float(v) for v in torch.stack([moved_sq, start_sq]).cpu())
        values = sum(p.numel() for p in self._initial)
        return WeightChange(l2=moved**0.5, relative=(moved / start) ** 0.5, values=values)

    def peak_memory_bytes(self) -> int | None:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        return None

    def memory_limit_bytes(self) -> int | None:
        """The caching allocator's limit: the device's total memory times the process's memory fraction (1 unless
        ``torch.cuda.set_per_process_memory_fraction`` lowered it)."""
        if self.device.type != "cuda":
            return None
        return memory_limit(self.device)


@dataclass
class _Built:
    """The model and its step functions, as :func:`_build_steps` made them."""

    model: nn.Module
    stream: torch.cuda.Stream | None
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer | None
    loss_sum: torch.Tensor | None
    step: StepFn
    odd_step: StepFn


def memory_limit(device: torch.device) -> int:
    """The most the caching allocator may hold on ``device``: its total memory times the process's memory fraction
    (``torch.cuda.get_per_process_memory_fraction``, 1.0 where this torch has no such reader)."""
    fraction_of = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    fraction = float(fraction_of(device)) if fraction_of is not None else 1.0
    return int(torch.cuda.get_device_properties(device).total_memory * fraction)


def build_workload(spec: RunSpec, data: Dataset, device: torch.device) -> TorchWorkload:
    """Everything between the loaded dataset and the first step (on this rank, when data parallel)."""
    parity = spec.parity
    worker = require_worker(spec)  # a launched worker when devices > 1
    if parity.loss != "cross_entropy":
        raise UnsupportedError(f"loss {parity.loss!r} is not implemented")
    check_dataset(parity, data)
    shards = plan_shards(spec, data.samples) if worker is not None else None
    training = parity.mode == "train"
    cuda = device.type == "cuda"
    plan = resolve_plan(spec, cuda)
    precision = apply_precision(parity.precision, device, training)
    if cuda:
        torch.backends.cudnn.benchmark = plan.cudnn_benchmark
    dist = init_process_group(worker, device, plan.cuda_graphs and training) if worker is not None else None
    clock = SetupClock()
    torch.manual_seed(parity.seed)
    model = build_model(parity.arch, parity.num_classes, parity.input.channels)
    init = load_shared_init(spec, model)  # bench's shared weights instead of the initialiser, when the spec says so
    params = trainable_parameters(model)
    clock.mark("model and weights")
    model = model.to(device)  # the first allocation on the device: CUDA makes its context here
    clock.mark("on the device")
    built = _build_steps(model, plan, precision, dist, device, parity.optimizer if training else None)
    local = shard_dataset(data, shards, dist.rank) if shards is not None and dist is not None else data
    clock.mark("steps built")
    source = BatchSource(local, parity.data_placement, device, plan.channels_last)
    clock.mark("data placed")
    _note_data(plan, parity.data_placement, source, shards, dist, data.samples, training, parity.batch.per_device)
    probe_images, probe_labels = source.batch(0, min(2, parity.batch.per_device))
    traced = traced_step(built.model, probe_images, probe_labels, precision, built.loss_fn if training else None)
    clock.mark("read-back trace")
    clock.say()
    workload = TorchWorkload(
        _runner(plan, built, source, spec, device), device, training, shards=shards, dist=dist, loss_sum=built.loss_sum,
        parameters=[p for p in built.model.parameters() if p.requires_grad],
        trainable_parameters=params,
        precision=precision.report(",".join(param_dtypes(built.model))),
        data_placement=source.placement_in_effect(),
        optimizations=plan.optimizations,
        world_size=dist.world_size if dist is not None else 1, compiled=plan.compile,
    )
    workload.readback = Readback(
        mode="train" if built.model.training else "infer", arch=parity.arch, input_shape=traced.input_shape,
        num_classes=traced.num_classes, observed=traced.observed, param_dtypes=param_dtypes(built.model), init=init,
        steps_per_dispatch=1, optimizer=optimizer_readback(built.optimizer) if built.optimizer is not None else None,
        loss=loss_readback(built.loss_fn) if training else None,
    )
    return workload


def configure_inductor(plan: OptimizationPlan) -> None:
    """Inductor's process-wide settings the plan asks for, read when the forward first compiles and its kernels first
    run (this process compiles only this model): freezing, and the tuning of Inductor's own kernels."""
    if not (plan.freezing or plan.kernel_tuning):
        return
    import torch._inductor.config as inductor_config

    if plan.freezing:
        inductor_config.freezing = True
    if plan.kernel_tuning:
        inductor_config.max_autotune_pointwise = True
        inductor_config.coordinate_descent_tuning = True


def _build_steps(model: nn.Module, plan: OptimizationPlan, precision: Precision, dist: DistContext | None, device: torch.device,
                 optimizer_block: Mapping[str, Any] | None) -> _Built:
    """The model in its memory format (DDP-wrapped, compiled as the plan says), its optimizer and step functions;
    ``optimizer_block``: the spec's optimizer when training, None for inference."""
    training = optimizer_block is not None
    if plan.channels_last:
        model = model.to(memory_format=torch.channels_last)
    # DDP wraps the model before the step is built; CUDA graphs need it built on the capture stream
    stream = torch.cuda.Stream(device) if dist is not None and plan.cuda_graphs and training else None
    net = wrap_ddp(model, dist, stream) if dist is not None and training else model
    configure_inductor(plan)
    forward = torch.compile(net, mode=plan.compile_mode) if plan.compile else net
    loss_fn = nn.CrossEntropyLoss()
    optimizer = None
    loss_sum = torch.zeros((), dtype=torch.float32, device=device) if training else None
    if optimizer_block is not None:
        model.train()
        optimizer = make_optimizer(model.parameters(), OptimizerSettings.from_spec(optimizer_block),
                                   fused=plan.fused_optimizer, capturable=plan.capturable_optimizer)
        parts = TrainParts(model=net, forward=forward, loss_fn=loss_fn, optimizer=optimizer,
                           precision=precision, scaler=precision.make_scaler(), loss_sum=loss_sum)
        step, odd_step = build_train_step(parts), build_train_step(parts, forward=net)
    else:
        model.eval()
        step, odd_step = build_infer_step(forward, precision), build_infer_step(model, precision)
    return _Built(model, stream, loss_fn, optimizer, loss_sum, step, without_autotune(odd_step))


def _note_data(plan: OptimizationPlan, placement: str, source: BatchSource, shards: ShardPlan | None, dist: DistContext | None,
               samples: int, training: bool, batch: int) -> None:
    """The data_placement and data_parallel switches of the run."""
    if shards is not None and dist is not None:
        plan.note("data_placement", True, f"{placement}: {source.detail}; this rank's shard only "
                                          f"({shards.shard_samples} of {samples} samples)")
        what = "DDP, gradients all-reduced in buckets during backward" if training else "independent forward passes"
        plan.note("data_parallel", True, f"{dist.layout()}; {what}; rank r takes samples start + r*{batch} .. + {batch} "
                                         f"of every global batch of {shards.global_batch}; BatchNorm statistics per device")
    else:
        plan.note("data_placement", True, f"{placement}: {source.detail}")
        plan.note("data_parallel", False, "one device")


def _runner(plan: OptimizationPlan, built: _Built, source: BatchSource, spec: RunSpec, device: torch.device) -> Runner:
    """The step runner: the whole step in a CUDA graph, or eager launches."""
    batch = spec.parity.batch.per_device
    if plan.cuda_graphs:
        geometry = spec.parity.input
        sample_shape = (geometry.channels, geometry.height, geometry.width)
        return GraphRunner(built.step, built.odd_step, source, batch, sample_shape, plan.channels_last, plan.graph_warmup_steps,
                           device, stream=built.stream)
    return EagerRunner(built.step, built.odd_step, source, batch)
