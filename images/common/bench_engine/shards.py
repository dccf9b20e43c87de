"""Data parallelism: which samples of each global batch every device (rank) trains on.

The harness walks the dataset in global batches of ``per_device x world_size`` samples
(:func:`bench_engine.schedule.batches_of_epoch`). Device ``r`` of ``world`` takes the ``r``-th
contiguous share of every global batch: samples ``start + r*share .. start + (r+1)*share`` with
``share = size / world`` (= the per-device batch for a full batch). A kept partial batch
(``drop_last`` false) is split the same way and must therefore divide by the device count;
the engines refuse it otherwise (``UnsupportedError``), so every device always runs the same
batch shape, as DDP, GSPMD and MirroredStrategy all expect.

Every epoch walks the same batches (dataset order), so a device's samples can be gathered once
into a compact per-device shard: global step ``i`` of an epoch is then the contiguous slice
``local_start(i) .. + share`` of that shard. Engines place the shard, not the whole split,
on each device.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from bench_engine.api import StepBatch, UnsupportedError
from bench_engine.contract import RunSpec
from bench_engine.data import Dataset
from bench_engine.schedule import batches_of_epoch


@dataclass(frozen=True)
class ShardPlan:
    """The per-device view of one epoch's global batches."""

    world: int
    per_device: int
    steps: tuple[StepBatch, ...]  # one epoch's global batches (the same in every epoch)

    @property
    def global_batch(self) -> int:
        return self.per_device * self.world

    @property
    def shard_samples(self) -> int:
        """Samples of one device's shard (one epoch's worth)."""
        return sum(step.size // self.world for step in self.steps)

    def share(self, batch: StepBatch) -> int:
        """Samples each device takes of ``batch``."""
        return batch.size // self.world

    def slice_of(self, batch: StepBatch, rank: int) -> tuple[int, int]:
        """(start, size) in dataset order of ``rank``'s share of the global ``batch``."""
        share = self.share(batch)
        return batch.start + rank * share, share

    def local(self, batch: StepBatch) -> StepBatch:
        """``batch`` in the coordinates of a device's compact shard (the same for every device)."""
        return StepBatch(epoch=batch.epoch, index=batch.index, start=self.local_starts[batch.index], size=self.share(batch))

    @cached_property
    def local_starts(self) -> tuple[int, ...]:
        """Shard start of every step of an epoch."""
        out, position = [], 0
        for step in self.steps:
            out.append(position)
            position += step.size // self.world
        return tuple(out)

    def rank_indices(self, rank: int) -> np.ndarray:
        """Dataset indices of ``rank``'s shard, in step order."""
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} outside 0..{self.world - 1}")
        parts = [np.arange(*_span(self.slice_of(step, rank))) for step in self.steps]
        return np.concatenate(parts) if parts else np.zeros((0,), np.int64)


def _span(start_size: tuple[int, int]) -> tuple[int, int]:
    start, size = start_size
    return start, start + size


def plan_shards(spec: RunSpec, samples: int, world: int | None = None) -> ShardPlan:
    """The shard plan of ``spec`` over ``world`` devices (default: the spec's device count)."""
    parity = spec.parity
    world = int(world or parity.devices)
    per_device = parity.batch.per_device
    steps = tuple(batches_of_epoch(1, samples, per_device * world, parity.steps_per_epoch))
    for step in steps:
        if step.size % world:
            raise UnsupportedError(
                f"the kept partial batch of {step.size} samples does not divide over {world} devices "
                f"(every device must run the same batch shape); use drop_last or another dataset size"
            )
    return ShardPlan(world=world, per_device=per_device, steps=steps)


def shard_dataset(data: Dataset, plan: ShardPlan, rank: int) -> Dataset:
    """``rank``'s compact shard (a copy of just its samples; ``data`` may be memory-mapped)."""
    index = plan.rank_indices(rank)
    return Dataset(images=np.ascontiguousarray(data.images[index]), labels=np.ascontiguousarray(data.labels[index]), sha256=data.sha256)


def stacked_shards(array: np.ndarray, plan: ShardPlan) -> np.ndarray:
    """Every device's shard of ``array`` stacked on a new leading axis: (world, shard_samples, ...)."""
    return np.stack([array[plan.rank_indices(rank)] for rank in range(plan.world)])
