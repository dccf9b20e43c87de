"""Several training steps per call: the queue engines run them through, and the calls it will make.

A small step is bound by the host issuing its kernels, so an engine may run ``group`` full
batches in one compiled call (JAX ``lax.scan``, TensorFlow ``tf.while_loop``). :class:`StepQueue`
holds that policy once: full batches wait until ``group`` of them are queued; a batch of
another size, or a flush (the workload's sync, which ends every timed block), first runs the
shorter queue step by step. :func:`planned_dispatches` replays the harness's schedule through
the same queue, so an engine knows before timing starts every call it will make (and can
compile each one during setup).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench_engine.api import StepBatch
from bench_engine.harness import timing_blocks


class StepQueue:
    """Hands full batches on ``group`` at a time to ``several``; everything else to ``single``, in order."""

    def __init__(self, group: int, full: int, single: Callable[[StepBatch], None],
                 several: Callable[[list[StepBatch]], None]) -> None:
        self.group, self.full, self.single, self.several = group, full, single, several
        self.pending: list[StepBatch] = []

    def push(self, batch: StepBatch) -> None:
        if self.group > 1 and batch.size == self.full:
            self.pending.append(batch)
            if len(self.pending) == self.group:
                self.flush()
            return
        self.flush()
        self.single(batch)

    def flush(self) -> None:
        """Run what is queued: one call of ``group`` batches, or a shorter queue step by step."""
        pending, self.pending = self.pending, []
        if len(pending) == self.group > 1:
            self.several(pending)
            return
        for batch in pending:
            self.single(batch)


def planned_dispatches(spec: dict[str, Any], samples: int, group: int, world: int = 1) -> list[tuple[int, tuple[int, ...]]]:
    """Every call the run makes, in order: (global batch size, the batch starts it takes).

    One start is a single step; ``group`` starts are one call of the several-step function.
    """
    full = spec["parity"]["batch"]["per_device"] * world
    calls: list[tuple[int, tuple[int, ...]]] = []
    queue = StepQueue(group, full, lambda batch: calls.append((batch.size, (batch.start,))),
                      lambda batches: calls.append((full, tuple(batch.start for batch in batches))))
    for block in timing_blocks(spec, samples, world):
        for batch in block.steps:
            queue.push(batch)
        queue.flush()
    return calls
