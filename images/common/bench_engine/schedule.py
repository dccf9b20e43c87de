"""The step schedule of a run, the one rule both sides use: the orchestrator to write the spec
(steps per epoch) and to check the samples an engine reports, the harness to issue the steps.

Steps are taken in dataset order. An epoch has ``steps_per_epoch`` steps of the global batch;
with ``drop_last`` false the last one carries the partial batch and counts its real size.
"""

from __future__ import annotations

import math
from typing import Any

from bench_engine.api import StepBatch


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


def epoch_samples(samples: int, batch: int, steps: int) -> int:
    """Samples one epoch of ``steps`` steps of ``batch`` takes from ``samples`` (a partial last batch at its size)."""
    return sum(min(batch, samples - index * batch) for index in range(steps))


def expected_samples(parity: dict[str, Any]) -> int:
    """Samples a run of the spec's ``parity`` block trains or infers on, every epoch counted."""
    return parity["epochs"] * epoch_samples(parity["dataset"]["samples"], parity["batch"]["global"], parity["steps_per_epoch"])
