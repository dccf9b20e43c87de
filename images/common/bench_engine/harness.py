"""The timing harness: warmup excluded, device synchronised before every clock read.

Steps are taken in dataset order. Epoch ``e`` has ``steps_per_epoch`` steps; with
``drop_last`` false the last step of an epoch carries the partial batch and is counted with
its real number of samples. The first ``warmup_steps`` steps of the run (compilation, graph
capture, autotuning) are timed as one block and excluded from the steady state. The steady
state is timed in windows of ``window_steps`` steps, each ended by a device sync; windows never
cross an epoch boundary. After each block's clock read the workload hears ``block_done()``; the
mean training loss of every block (``block_losses()``) and the first per-step losses are read
once, after the last step, so no read of the device enters a timed window.

Data parallel (``workload.world_size`` N > 1): every step is a global batch of
``per_device x N`` samples and counts all of them; the workload runs each device's share
(bench_engine.shards). With one process per device every worker runs this harness over the
same global batches, and the launcher keeps the slowest worker's times (bench_engine.launch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from bench_engine.api import StepBatch, Workload
from bench_engine.contract import ResultMeasurements, Steady, Window, latency_of, steady_of
from bench_engine.progress import Heartbeat, current
from bench_engine.schedule import Schedule, batches_of_epoch, epoch_samples


@dataclass(frozen=True)
class Block:
    """Steps the harness issues between two clock reads: the warmup block or one timing window."""

    epoch: int
    warmup: bool
    steps: list[StepBatch]
    last_of_epoch: bool


def timing_blocks(plan: Schedule, samples: int, world_size: int = 1) -> Iterator[Block]:
    """Every block of the run in order: the warmup steps, then windows of ``window_steps``.

    The one schedule of the harness (``RunSpec.schedule``); engines read it to know in advance which
    step shapes a run will dispatch (so they can compile them all during setup, never inside the steady state).
    """
    batch = plan.per_device * world_size
    window = plan.window_steps
    warmup_left = plan.warmup_steps
    for epoch in range(1, plan.epochs + 1):
        steps = batches_of_epoch(epoch, samples, batch, plan.steps_per_epoch)
        position = 0
        if warmup_left:
            block = steps[:warmup_left]
            warmup_left -= len(block)
            position = len(block)
            yield Block(epoch, True, block, position >= len(steps))
        while position < len(steps):
            block = steps[position : position + window]
            position += len(block)
            yield Block(epoch, False, block, position >= len(steps))


class EpochTime(NamedTuple):
    """One finished epoch (``measurements.epochs``; ``_asdict()`` is the document)."""

    epoch: int
    steps: int
    samples: int
    time_s: float


@dataclass
class Measurements:
    """What the harness measured; partial measurements survive a failure."""

    warmup_s: float = 0.0
    warmup_steps: int = 0
    epochs: list[EpochTime] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    steps_done: int = 0
    samples_done: int = 0
    epochs_done: int = 0
    loss_first: float | None = None
    final_loss: float | None = None
    batch_max: int = 0  # the largest (global) batch the loop issued
    losses: list[float] = field(default_factory=list)  # the first LOSS_STEPS training losses
    block_losses: list[float] = field(default_factory=list)  # the mean training loss of each block, in order

    def steady(self) -> Steady:
        return steady_of(self.windows)

    def latency_ms(self) -> dict[str, float] | None:
        """Per-batch latency percentiles from windows of one step each (inference)."""
        return latency_of(self.windows)

    def result(self, setup_s: float, peak_memory_bytes: int | None,
               setup_parts: Mapping[str, float] | None = None, memory_limit_bytes: int | None = None) -> ResultMeasurements:
        """The result's measurements block (every window kept: the writer caps them)."""
        return ResultMeasurements(
            setup_s=setup_s, warmup_s=self.warmup_s, warmup_steps=self.warmup_steps, steady=self.steady()._asdict(),
            epochs=tuple(e._asdict() for e in self.epochs), windows=tuple(self.windows), latency_ms=self.latency_ms(),
            peak_memory_bytes=peak_memory_bytes, memory_limit_bytes=memory_limit_bytes, final_loss=self.final_loss, loss_first=self.loss_first,
            losses=tuple(self.losses), block_losses=tuple(self.block_losses), setup_parts=setup_parts,
        )


def run_harness(workload: Workload, plan: Schedule, samples: int, measured: Measurements,
                heartbeat: Heartbeat | None = None) -> Measurements:
    """Run every step of the schedule ``plan`` on ``workload``, filling ``measured`` as it goes.

    ``heartbeat`` (this process's, by default) hears the phase (warmup, timing) and every step.
    """
    beat = heartbeat or current()
    clock = time.perf_counter
    epoch_time = 0.0
    blocks = list(timing_blocks(plan, samples, workload.world_size))
    totals = {warmup: sum(len(b.steps) for b in blocks if b.warmup == warmup) for warmup in (True, False)}
    for block in blocks:
        name = "warmup" if block.warmup else "timing"
        if beat.phase_name != name:
            beat.phase(name, totals[block.warmup])
        if block.warmup:
            workload.sync()
        t0 = clock()
        for item in block.steps:
            workload.step(item)
            beat.step()
        workload.sync()
        elapsed = clock() - t0
        workload.block_done()  # after the clock read: bookkeeping only, nothing waits for the device
        epoch_time += elapsed
        _count(measured, block.steps)
        if block.warmup:
            measured.warmup_s += elapsed
            measured.warmup_steps += len(block.steps)
            if measured.loss_first is None:
                measured.loss_first = workload.loss()
        else:
            measured.windows.append(Window(len(block.steps), sum(b.size for b in block.steps), elapsed))
        if block.last_of_epoch:
            measured.epochs_done = block.epoch
            batch = plan.per_device * workload.world_size
            measured.epochs.append(EpochTime(block.epoch, plan.steps_per_epoch, epoch_samples(samples, batch, plan.steps_per_epoch),
                                             epoch_time))
            epoch_time = 0.0
    measured.final_loss = workload.loss()
    measured.losses = [float(v) for v in workload.losses()]
    measured.block_losses = [float(v) for v in workload.block_losses()]
    if measured.loss_first is None:
        measured.loss_first = measured.final_loss
    return measured


def _count(measured: Measurements, block: list[StepBatch]) -> None:
    measured.steps_done += len(block)
    measured.batch_max = max([measured.batch_max, *(b.size for b in block)])
    measured.samples_done += sum(b.size for b in block)
