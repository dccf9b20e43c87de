"""The step schedule of a run, the one rule both sides use: the orchestrator to write the spec
(steps per epoch) and to check the samples an engine reports, the harness to issue the steps.

Steps are taken in dataset order. An epoch has ``steps_per_epoch`` steps of the global batch;
with ``drop_last`` false the last one carries the partial batch and counts its real size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class StepBatch:
    """One step's slice of the dataset: samples ``start .. start + size`` (dataset order)."""

    epoch: int
    index: int  # step index within the epoch, from 0
    start: int
    size: int  # samples in this batch (smaller than the batch for a kept partial batch)


class Schedule(NamedTuple):
    """What the harness's step schedule reads of a run spec (``RunSpec.schedule``)."""

    per_device: int  # the per-device batch (a global batch is per_device x devices)
    steps_per_epoch: int
    epochs: int
    warmup_steps: int
    window_steps: int

    @classmethod
    def from_json(cls, spec: Mapping[str, Any]) -> Schedule:
        """The schedule of a run-spec document (the orchestrator's side, which holds the JSON)."""
        parity = spec["parity"]
        return cls(int(parity["batch"]["per_device"]), int(parity["steps_per_epoch"]), int(parity["epochs"]),
                   int(parity["warmup_steps"]), int(spec["measurement"]["window_steps"]))


def steps_per_epoch(samples: int, global_batch: int, drop_last: bool) -> int:
    """Steps of one epoch: whole batches only (``drop_last``) or one more for the remainder."""
    return samples // global_batch if drop_last else math.ceil(samples / global_batch)


def batches_of_epoch(epoch: int, samples: int, batch: int, steps: int) -> list[StepBatch]:
    """The ``steps`` steps of one epoch; the last is partial when the dataset does not divide evenly."""
    out = []
    for index in range(steps):
        start = index * batch
        size = min(batch, samples - start)
        if size <= 0:
            raise ValueError(f"step {index} of epoch {epoch} starts past the dataset ({samples} samples)")
        out.append(StepBatch(epoch=epoch, index=index, start=start, size=size))
    return out


def samples_read(samples: int, global_batch: int, steps: int) -> int:
    """How many of the split's first samples an epoch of ``steps`` steps reads (every epoch reads the same)."""
    return min(samples, global_batch * steps)


def epoch_samples(samples: int, batch: int, steps: int) -> int:
    """Samples one epoch of ``steps`` steps of ``batch`` takes from ``samples`` (a partial last batch at its size)."""
    return sum(min(batch, samples - index * batch) for index in range(steps))


