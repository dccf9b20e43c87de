"""The TensorFlow workload: runs the built step per batch, queues full batches for the looping step.

With ``steps_per_dispatch`` K > 1 full batches are queued and dispatched K per call of the looping
step (bench_engine.dispatch.StepQueue); a partial batch or a sync first runs a shorter queue step
by step with the one-step function.

What compiles when: ``tf.function`` traces a Python function into a graph at its first call, and
XLA (or the graph runtime) compiles it for the call's input shapes at its first *execution*;
TensorFlow has no public way to compile a function without running it (``get_concrete_function``
only traces). So on resident data (one device) :meth:`TensorFlowWorkload.precompile` runs every
kind of call the run will make once, after copying every model and optimizer variable to host
memory, then assigns the copies back: the run starts from exactly the state of setup, with every
shape compiled (and the start tensors made on the device) before the warmup. Fed from host
memory, or on several devices, a shape still compiles at its first execution: the full batch in
the warmup block, a kept partial batch at the end of the first epoch, inside a timing window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench_engine.api import LOSS_STEPS, StepBatch, Workload
from bench_engine.blocklosses import BlockLosses
from bench_engine.dispatch import StepQueue
from bench_engine.weights import WeightChange, weight_change


@dataclass
class TensorFlowWorkload(Workload):
    """ResNet training or inference steps under TensorFlow."""

    tf: Any = None
    step_fn: Callable[..., Any] | None = None
    train: bool = True
    resident: bool = True
    host_images: Any = None
    host_labels: Any = None
    device_kind: str = "cpu"
    starts: dict[int, Any] = field(default_factory=dict)  # step start -> int32 tensor made in setup, on the device
    last: Any = None
    keep: list[Any] = field(default_factory=list)  # objects that must outlive the run (model, optimizer, data)
    strategy: Any = None  # MirroredStrategy of a several-device run
    shards: Any = None  # its bench_engine.shards.ShardPlan
    devices: list[str] = field(default_factory=list)
    steps_per_dispatch: int = 1  # >1: full batches are queued and dispatched that many per call of multi_fn
    multi_fn: Callable[..., Any] | None = None  # build_step(steps=steps_per_dispatch): multi_fn(starts, size)
    full_size: int = 0  # the full batch (one device)
    groups: dict[tuple[int, ...], Any] = field(default_factory=dict)  # batch starts of a multi_fn call -> int32 tensor
    _queue: StepQueue | None = None
    _history: list[Any] = field(default_factory=list)  # the first LOSS_STEPS losses (tensors, read after the run)
    _recorded: int = 0
    _blocks: BlockLosses = field(default_factory=BlockLosses)  # every loss output, by harness block (tensors)
    initial_weights: list[Any] = field(default_factory=list)  # the trainable values after loading (numpy)

    def _remember(self, steps: int) -> None:
        if not self.train:
            return
        self._blocks.add(self.last)
        if self._recorded < LOSS_STEPS:
            self._history.append(self.last)
            self._recorded += steps

    def _per_step(self, item: Any) -> np.ndarray:
        """One call's loss output as one global-batch loss per step (replicas averaged)."""
        if self.strategy is not None:
            item = self.strategy.reduce(self.tf.distribute.ReduceOp.MEAN, item, axis=None)
        return np.atleast_1d(np.asarray(item.numpy(), dtype=np.float64))

    def losses(self) -> list[float]:
        values = [float(v) for item in self._history for v in self._per_step(item)]
        return values[:LOSS_STEPS]

    def block_done(self) -> None:
        if self.train:
            self._blocks.close()

    def block_losses(self) -> list[float]:
        return self._blocks.means(self._per_step) if self.train else []

    def precompile(self, dispatches: Iterable[tuple[int, tuple[int, ...]]], state: list[Any]) -> None:
        """Before timing: compile every (batch size, steps per call) the run will dispatch; the state is left as it was.

        TensorFlow compiles a function (XLA or graph) at its first execution, so each kind of call
        is executed once here, its start tensors made on the device. ``state`` (every variable of
        the model and optimizer) is copied to host memory first and assigned back afterwards: the
        run starts from the bits of setup, and no device memory is held for the copy.
        """
        first: dict[tuple[int, int], tuple[int, ...]] = {}
        for size, starts in dispatches:
            if len(starts) > 1:
                self._group(starts)
            first.setdefault((size, len(starts)), starts)
        saved = [np.array(variable.numpy()) for variable in state]
        for (size, steps), starts in sorted(first.items()):
            if steps > 1:
                assert self.multi_fn is not None
                self.last = self.multi_fn(self._group(starts), size)
            else:
                self._single(StepBatch(epoch=0, index=0, start=starts[0], size=size))
        self.sync()
        for variable, value in zip(state, saved, strict=True):
            variable.assign(value)
        self.sync()
        self.last = None
        self._history, self._recorded = [], 0  # the compile calls are not steps of the run
        self._blocks.reset()

    def _group(self, starts: tuple[int, ...]) -> Any:
        made = self.groups.get(starts)
        if made is None:
            made = self.groups[starts] = self.tf.identity(self.tf.constant(list(starts), self.tf.int32))
        return made

    def __post_init__(self) -> None:
        self._queue = StepQueue(self.steps_per_dispatch, self.full_size, self._single, self._several)

    def step(self, batch: StepBatch) -> None:
        assert self._queue is not None
        self._queue.push(batch)  # full batches wait for the next ones; sync() or a partial batch runs a shorter queue

    def _several(self, batches: list[StepBatch]) -> None:
        """``steps_per_dispatch`` full batches in one call of the looping step."""
        assert self.multi_fn is not None
        self.last = self.multi_fn(self._group(tuple(batch.start for batch in batches)), self.full_size)
        self._remember(len(batches))

    def _single(self, batch: StepBatch) -> None:
        """One step, one call."""
        self._one(batch)
        self._remember(1)

    def _one(self, batch: StepBatch) -> None:
        if self.strategy is not None:
            self.last = self._replicated_step(batch)
            return
        if self.resident:
            start = self.starts.get(batch.start)
            if start is None:
                start = self.tf.constant(batch.start, self.tf.int32)
            out = self.step_fn(start, batch.size)
        else:
            end = batch.start + batch.size
            out = self.step_fn(self.host_images[batch.start : end], self.host_labels[batch.start : end])
        self.last = out

    def _replicated_step(self, batch: StepBatch) -> Any:
        local = self.shards.local(batch)
        if self.resident:
            start = self.starts.get(local.start)
            if start is None:
                start = self.tf.constant(local.start, self.tf.int32)
            return self.step_fn(start, local.size)
        tf, world = self.tf, self.shards.world
        images = self.host_images[batch.start : batch.start + batch.size].reshape(world, local.size, *self.host_images.shape[1:])
        labels = self.host_labels[batch.start : batch.start + batch.size].reshape(world, local.size)

        def on_device(ctx: Any) -> tuple[Any, Any]:
            rank = ctx.replica_id_in_sync_group
            with tf.device(self.devices[rank]):
                return tf.convert_to_tensor(images[rank]), tf.convert_to_tensor(labels[rank])

        x, y = self.strategy.experimental_distribute_values_from_function(on_device)
        return self.step_fn(x, y)

    def sync(self) -> None:
        assert self._queue is not None
        self._queue.flush()
        sync_devices = getattr(getattr(self.tf.test, "experimental", None), "sync_devices", None)
        if sync_devices is not None:
            sync_devices()
        elif self.last is not None:  # older TensorFlow: a read back waits for the stream
            self.tf.reduce_sum(self.last).numpy()

    def loss(self) -> float | None:
        if not self.train or self.last is None:
            return None
        if self.strategy is not None:  # the mean of the replicas' losses (outside the timed windows)
            return float(self.strategy.reduce(self.tf.distribute.ReduceOp.MEAN, self.last, axis=None).numpy())
        return float(np.atleast_1d(self.last.numpy())[-1])

    def weight_change(self) -> WeightChange | None:
        if not self.initial_weights:
            return None
        return weight_change(self.initial_weights, [v.numpy() for v in self.keep[0].trainable_variables])

    def peak_memory_bytes(self) -> int | None:
        if self.device_kind != "cuda":
            return None
        peaks = []
        for index in range(max(1, len(self.devices))):
            try:
                peaks.append(int(self.tf.config.experimental.get_memory_info(f"GPU:{index}")["peak"]))
            except (ValueError, KeyError):
                pass
        return max(peaks) if peaks else None
