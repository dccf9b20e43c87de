"""The JAX workload: model state, data and the compiled steps (one per batch size and steps per call).

Steps dispatch asynchronously. With ``steps_per_dispatch`` K > 1, full batches are queued and run
K at a time by one jitted ``lax.scan`` over their batch starts (bench_engine.dispatch.StepQueue).
With device data every shape the run will dispatch (:func:`planned_calls`, from the harness's
schedule) is compiled ahead of time, so none compiles inside the warmup or a timed window.
Data parallel: a global batch is laid out as ``(devices, share, ...)`` (device ``r`` holds
samples ``start + r*share ..``, see bench_engine.shards) on a 1-D mesh with axis ``data``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import jax
import numpy as np

from bench_engine.api import LOSS_STEPS, StepBatch, Workload
from bench_engine.blocklosses import BlockLosses
from bench_engine.dispatch import StepQueue, planned_dispatches
from bench_engine.harness import timing_blocks
from bench_engine.schedule import Schedule
from bench_engine.weights import WeightChange, weight_change
from bench_jax.step import StepConfig, build_step, replicated, sharded


@dataclass
class JaxWorkload(Workload):
    """Model state, data and compiled steps (one per batch size); steps dispatch asynchronously."""

    mode: str = "train"
    model: Any = None
    tx: Any = None
    state: Any = None  # TrainState (train) or the variables dict (infer)
    data: Any = None  # (images, labels): on the device, or host numpy arrays
    device: Any = None
    step_config: StepConfig | None = None
    mesh: Any = None  # data parallel: the 1-D device mesh (axis 'data')
    shards: Any = None  # data parallel: bench_engine.shards.ShardPlan
    steps_per_dispatch: int = 1  # >1: full batches are queued and dispatched that many per jitted call
    _steps: dict[tuple[int, int], Callable[..., Any]] = field(default_factory=dict)
    _starts: dict[Any, Any] = field(default_factory=dict)
    _queue: StepQueue | None = None
    _last: Any = None  # latest loss (train) or logits (infer); a vector of losses after a several-step call
    _history: list[Any] = field(default_factory=list)  # the first LOSS_STEPS losses, on the device
    initial_params: Any = None  # training: the parameters after loading, on the host (numpy leaves)
    unpack: Callable[[Any], Any] | None = None  # inference with packed variables: ``state`` is bench_jax.packing buffers
    _blocks: BlockLosses = field(default_factory=BlockLosses)  # every loss output, by harness block, on the device

    def precompile(self, calls: set[tuple[int, int]]) -> None:
        """Compile every (per-device batch, steps per call) the run will dispatch, before timing starts.

        Device-resident data only (the inputs' shapes are known: the placed split and the start
        indices). The compiled executables are called directly, so no shape ever compiles inside
        the warmup or the steady state, a kept partial batch and a short queue included.
        """
        for size, steps in sorted(calls):
            fn = self._step_fn(size, steps)
            if not hasattr(fn, "lower"):  # the baseline's eager update around a jitted forward/backward: compiles on first use
                continue
            where = self._on_device(np.zeros((steps,), np.int32) if steps > 1 else np.int32(0))
            self._steps[(size, steps)] = fn.lower(self.state, self.data, where).compile()

    def _step_fn(self, size: int, steps: int = 1) -> Callable[..., Any]:
        fn = self._steps.get((size, steps))
        if fn is None:
            assert self.step_config is not None
            config = replace(self.step_config, size=size, steps=steps)
            fn = self._steps[(size, steps)] = build_step(self.model, self.tx, config, self.mesh, self.unpack)
        return fn

    def _local_start(self, batch: StepBatch) -> int:
        return self.shards.local(batch).start if self.shards is not None else batch.start

    def _on_device(self, value: Any) -> Any:
        return jax.device_put(value, replicated(self.mesh) if self.shards is not None else self.device)

    def _inputs(self, batch: StepBatch) -> tuple[Any, Any]:
        assert self.step_config is not None
        parallel = self.shards is not None
        if self.step_config.device_data:
            return self.data, self._where(batch)
        images, labels = self.data
        stop = batch.start + batch.size
        images, labels = images[batch.start : stop], labels[batch.start : stop]
        if parallel:  # (devices, share, ...): device r gets samples start + r*share ..
            world = self.shards.world
            batch_in = (images.reshape(world, -1, *images.shape[1:]), labels.reshape(world, -1))
            return jax.device_put(batch_in, sharded(self.mesh)), None
        return jax.device_put((images, labels), self.device), None

    def _where(self, batch: StepBatch) -> Any:
        """The step's start index as a device scalar (placed once, kept for the run)."""
        start = self._local_start(batch)
        where = self._starts.get(start)
        if where is None:
            where = self._starts[start] = self._on_device(np.int32(start))
        return where

    def _where_several(self, batches: list[StepBatch]) -> Any:
        """The starts of one several-step call as one device vector (placed once, kept for the run)."""
        key = tuple(self._local_start(batch) for batch in batches)
        starts = self._starts.get(key)
        if starts is None:
            starts = self._starts[key] = self._on_device(np.asarray(key, dtype=np.int32))
        return starts

    def place_starts(self, plan: Schedule, samples: int) -> int:
        """Place every start index the harness's schedule will hand the steps before timing starts (device-resident
        data): a step then transfers nothing from the host. Placed during a timed step, each new start was a
        host-to-device copy inside the measured call; at batch 1 every timed step had one (120 starts, 20 seen in the
        warmup). Returns how many are placed."""
        full = (self.step_config.size if self.step_config else 0) * self.world_size
        queue = StepQueue(self.steps_per_dispatch, full, self._where, self._where_several)
        for block in timing_blocks(plan, samples, self.world_size):
            for batch in block.steps:
                queue.push(batch)
            queue.flush()
        jax.block_until_ready(list(self._starts.values()))
        return len(self._starts)

    def __post_init__(self) -> None:
        full = (self.step_config.size if self.step_config else 0) * self.world_size
        self._queue = StepQueue(self.steps_per_dispatch, full, self._dispatch, self._dispatch_several)

    def step(self, batch: StepBatch) -> None:
        assert self._queue is not None
        self._queue.push(batch)  # full batches wait for the next ones; sync() runs a shorter queue

    def _dispatch(self, batch: StepBatch) -> None:
        data, where = self._inputs(batch)
        fn = self._step_fn(batch.size // self.world_size)
        if self.mode == "infer":
            self._last = fn(self.state, data, where)
        else:
            self.state, self._last = fn(self.state, data, where)
            self._remember(1)

    def _remember(self, steps: int) -> None:
        """Keep the loss output(s): every one for its block's mean, the first LOSS_STEPS steps' for the
        per-step record (device arrays: no synchronisation)."""
        self._blocks.add(self._last)
        if sum(int(np.size(h)) for h in self._history) < LOSS_STEPS:
            self._history.append(self._last)

    def losses(self) -> list[float]:
        values = [float(v) for h in self._history for v in _per_step(h)]
        return values[:LOSS_STEPS]

    def block_done(self) -> None:
        if self.mode == "train":
            self._blocks.close()

    def block_losses(self) -> list[float]:
        return self._blocks.means(_per_step) if self.mode == "train" else []

    def _dispatch_several(self, batches: list[StepBatch]) -> None:
        """``steps_per_dispatch`` full batches in one call of the multi-step function."""
        assert self.step_config is not None
        fn = self._step_fn(self.step_config.size, len(batches))
        self.state, self._last = fn(self.state, self.data, self._where_several(batches))
        self._remember(len(batches))

    def sync(self) -> None:
        """Wait for the device. Inference leaves the variables as they were: its logits are the step's one output,
        so they are what is waited for, not every leaf of the variables (a host cost per call at batch 1)."""
        assert self._queue is not None
        self._queue.flush()
        jax.block_until_ready(self._last if self.mode == "infer" else (self.state, self._last))

    def loss(self) -> float | None:
        if self.mode != "train" or self._last is None:
            return None
        return float(np.atleast_1d(np.asarray(self._last))[-1])

    def weight_change(self) -> WeightChange | None:
        if self.initial_params is None or self.state is None:
            return None
        return weight_change(jax.tree.leaves(self.initial_params), jax.tree.leaves(jax.device_get(self.state.params)))

    def peak_memory_bytes(self) -> int | None:
        """The device's peak (the largest over the mesh's devices when data parallel)."""
        peaks = [stat for stat in (_memory_stat(d, "peak_bytes_in_use", "bytes_in_use") for d in self._devices()) if stat is not None]
        return max(peaks) if peaks else None

    def memory_limit_bytes(self) -> int | None:
        """The allocator's limit, as XLA reports it (the smallest over the mesh's devices when data parallel)."""
        return allocator_limit(self._devices())

    def _devices(self) -> list[Any]:
        return list(self.mesh.devices.flat) if self.mesh is not None else [self.device]


def allocator_limit(devices: list[Any]) -> int | None:
    """The smallest of the devices' allocator limits (memory_stats' ``bytes_limit``); None where none reports one
    (the CPU)."""
    limits = [stat for stat in (_memory_stat(d, "bytes_limit") for d in devices) if stat is not None]
    return min(limits) if limits else None


def _memory_stat(device: Any, *keys: str) -> int | None:
    """The first of ``keys`` in the device's memory_stats(); None where it has no such figure."""
    try:
        stats = device.memory_stats() or {}
    except Exception:
        return None
    for key in keys:
        if stats.get(key) is not None:
            return int(stats[key])
    return None


def _per_step(output: Any) -> np.ndarray:
    """A call's loss output as one loss per step (a scalar from one step, a vector from a ``lax.scan``)."""
    return np.atleast_1d(np.asarray(output, dtype=np.float64))


def planned_calls(plan: Schedule, samples: int, world: int, group: int) -> set[tuple[int, int]]:
    """The (per-device batch, steps per call) pairs :class:`JaxWorkload` dispatches over the harness's schedule."""
    return {(size // world, len(starts)) for size, starts in planned_dispatches(plan, samples, group, world)}
