"""The step: one function builds the training (or inference) step; runners issue it per batch.

``build_train_step`` is the single place where a training step is defined (forward under the
precision policy, loss, backward, optimizer update, loss scaling); data-parallel runs wrap the
model before it and keep the step. Runners feed it: :class:`EagerRunner` calls it per batch,
:class:`GraphRunner` warms it up on a side stream, captures the whole step in one CUDA graph
and replays the graph with the batch copied into static input buffers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from bench_engine.api import StepBatch
from bench_pytorch.batches import BatchSource
from bench_pytorch.precision import Precision

# (images, labels, set_to_none) -> loss (training) or logits (inference); never synchronises
StepFn = Callable[[torch.Tensor, torch.Tensor, bool], torch.Tensor]


@dataclass
class TrainParts:
    """What a training step is made of. ``forward`` may be a compiled ``model``."""

    model: nn.Module
    forward: Callable[[torch.Tensor], torch.Tensor]
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer
    precision: Precision
    scaler: torch.amp.GradScaler | None = None
    # a static fp32 scalar on the device: every step adds its loss (inside a captured graph too)
    loss_sum: torch.Tensor | None = None


def build_train_step(parts: TrainParts, forward: Callable[[torch.Tensor], torch.Tensor] | None = None) -> StepFn:
    """One SGD step on a batch; returns the (unscaled, detached) loss tensor and adds it to ``parts.loss_sum``.

    ``forward`` overrides ``parts.forward`` (the eager model for odd-shaped batches). With
    ``set_to_none`` the gradients are reallocated by backward (the form captured in a CUDA
    graph); without, they are zeroed in place (safe after capture, when they live in the graph's pool).
    """
    run_forward = forward or parts.forward
    optimizer, scaler, loss_fn, precision = parts.optimizer, parts.scaler, parts.loss_fn, parts.precision
    loss_sum = parts.loss_sum

    def train_step(images: torch.Tensor, labels: torch.Tensor, set_to_none: bool = True) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=set_to_none)
        with precision.autocast():
            loss = loss_fn(run_forward(images), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        if loss_sum is not None:  # on the device, in the step: a CUDA graph replays the addition
            loss_sum.add_(loss.detach().float())
        return loss.detach()

    return train_step


def build_infer_step(forward: Callable[[torch.Tensor], torch.Tensor], precision: Precision) -> StepFn:
    """A forward pass under inference mode and the precision policy; returns the logits."""

    def infer_step(images: torch.Tensor, labels: torch.Tensor, set_to_none: bool = True) -> torch.Tensor:
        with torch.inference_mode(), precision.autocast():
            return forward(images)

    return infer_step


def without_autotune(step: StepFn) -> StepFn:
    """``step`` with cuDNN autotuning off: a rare odd-shaped batch would otherwise benchmark
    every convolution of the new shape inside the timed steady state."""

    def untuned_step(images: torch.Tensor, labels: torch.Tensor, set_to_none: bool = True) -> torch.Tensor:
        saved = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = False
        try:
            return step(images, labels, set_to_none)
        finally:
            torch.backends.cudnn.benchmark = saved

    return untuned_step


class EagerRunner:
    """Calls the step per batch; batches of another size than ``batch`` go to ``odd_step``."""

    def __init__(self, step: StepFn, odd_step: StepFn, source: BatchSource, batch: int) -> None:
        self.step, self.odd_step, self.source, self.batch = step, odd_step, source, batch

    def __call__(self, batch: StepBatch) -> torch.Tensor:
        images, labels = self.source.batch(batch.start, batch.size)
        if batch.size != self.batch:
            return self.odd_step(images, labels, False)
        return self.step(images, labels, True)


class GraphRunner:
    """Whole-step CUDA graph: side-stream warmup steps, one capture, then replays.

    Every call is exactly one real step on its batch: the first ``warmup`` full batches run
    the step on a side stream (compilation and autotuning happen there, as the PyTorch CUDA
    graph docs require before capture), the next one is captured and replayed. Batches of
    another size (a kept partial batch) run ``odd_step`` eagerly on the same parameters.
    """

    def __init__(self, step: StepFn, odd_step: StepFn, source: BatchSource, batch: int,
                 sample_shape: tuple[int, ...], channels_last: bool, warmup: int, device: torch.device,
                 stream: torch.cuda.Stream | None = None) -> None:
        self.step, self.odd_step, self.source, self.batch = step, odd_step, source, batch
        memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.static_images = torch.empty((batch, *sample_shape), device=device).contiguous(memory_format=memory_format)
        self.static_labels = torch.zeros((batch,), dtype=torch.int64, device=device)
        self.warmup_left = max(1, warmup)
        # A DDP step brings the stream DDP was built on: warmup and capture both run there
        # (PyTorch's DDP + CUDA graph recipe); otherwise a private side stream, captured by
        # torch.cuda.graph on its own internal stream.
        self.side_stream = stream if stream is not None else torch.cuda.Stream(device)
        self.capture_stream = stream
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_out: torch.Tensor | None = None

    def __call__(self, batch: StepBatch) -> torch.Tensor:
        if batch.size != self.batch:
            images, labels = self.source.batch(batch.start, batch.size)
            return self.odd_step(images, labels, False)
        self.source.fill(batch.start, batch.size, self.static_images, self.static_labels)
        if self.graph is None:
            if self.warmup_left > 0:
                self.warmup_left -= 1
                return self._side_stream_step()
            self._capture()
        assert self.graph is not None and self.static_out is not None
        self.graph.replay()
        return self.static_out

    def _side_stream_step(self) -> torch.Tensor:
        main = torch.cuda.current_stream()
        self.side_stream.wait_stream(main)
        with torch.cuda.stream(self.side_stream):
            out = self.step(self.static_images, self.static_labels, True)
        main.wait_stream(self.side_stream)
        return out

    def release(self) -> None:
        """Free the captured graph (before the process group is destroyed: its NCCL work lives in the graph)."""
        if self.graph is not None:
            torch.cuda.synchronize()
            self.graph.reset()
            self.graph, self.static_out = None, None

    def _capture(self) -> None:
        from bench_engine.result import log

        started = time.perf_counter()
        log("CUDA graph: capturing the whole step")  # a hang from here on is in the capture (stacks: _capture)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.capture_stream):
            self.static_out = self.step(self.static_images, self.static_labels, True)
        self.graph = graph
        log(f"CUDA graph: captured in {time.perf_counter() - started:.1f}s")
