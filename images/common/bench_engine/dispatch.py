"""Several training steps per call: the queue engines run them through, and the calls it will make.

A small step is bound by the host issuing its kernels, so an engine may run ``group`` full
batches in one compiled call (JAX ``lax.scan``, TensorFlow ``tf.while_loop``). :class:`StepQueue`
holds that policy once: full batches wait until ``group`` of them are queued; a batch of
another size, or a flush (the workload's sync, which ends every timed block), first runs the
shorter queue step by step. :func:`planned_dispatches` replays the harness's schedule through
the same queue, so an engine knows before timing starts every call it will make (and can
compile each one during setup). :func:`auto_steps_per_dispatch` fits ``group`` to that schedule
and :func:`choose_steps_per_dispatch` holds the ``auto`` policy both XLA engines share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench_engine.api import StepBatch
from bench_engine.harness import timing_blocks
from bench_engine.schedule import Schedule


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


def planned_dispatches(plan: Schedule, samples: int, group: int, world: int = 1) -> list[tuple[int, tuple[int, ...]]]:
    """Every call the run makes, in order: (global batch size, the batch starts it takes).

    One start is a single step; ``group`` starts are one call of the several-step function.
    """
    full = plan.per_device * world
    calls: list[tuple[int, tuple[int, ...]]] = []
    queue = StepQueue(group, full, lambda batch: calls.append((batch.size, (batch.start,))),
                      lambda batches: calls.append((full, tuple(batch.start for batch in batches))))
    for block in timing_blocks(plan, samples, world):
        for batch in block.steps:
            queue.push(batch)
        queue.flush()
    return calls


# The longest group auto tries. Each K the run dispatches is one more program compiled during
# setup, a longer loop compiles slower, and the saving flattens (the host's launch cost per step
# falls as 1/K): on an H200 the seed scenario (ResNet-50 at 32x32, batch 128, windows of 40) ran
# 27.4k img/s (tf32) at K=10 against 9.3k at K=1. 16 covers the bundled windows (5, 10, 40).
AUTO_CAP = 16

# Device kinds on which auto loops: XLA's GPU while loop costs little per trip, while XLA's CPU
# while loop ran a step ~4x slower than one step per call, so on a CPU auto stays 1.
LOOP_KINDS = ("cuda",)


@dataclass(frozen=True)
class DispatchChoice:
    """Training steps per call and a one-line reason (the result's optimizations detail)."""

    steps: int
    reason: str


def timed_calls(plan: Schedule, samples: int, group: int, world: int = 1) -> tuple[int, int]:
    """(framework calls, steps) over the timed blocks (warmup excluded) with ``group`` steps per call.

    Each block is replayed through :class:`StepQueue` and flushed at its end, as the harness's sync does.
    """
    full = plan.per_device * world
    blocks = Counter(tuple(b.size for b in block.steps) for block in timing_blocks(plan, samples, world) if not block.warmup)
    calls = sum(_calls_of(sizes, group, full) * repeats for sizes, repeats in blocks.items())
    return calls, sum(len(sizes) * repeats for sizes, repeats in blocks.items())


def _calls_of(sizes: tuple[int, ...], group: int, full: int) -> int:
    """Calls the queue makes for one block of these batch sizes (the queue reads sizes only)."""
    calls: list[Any] = []
    queue = StepQueue(group, full, calls.append, calls.append)
    for index, size in enumerate(sizes):
        queue.push(StepBatch(epoch=0, index=index, start=0, size=size))
    queue.flush()
    return len(calls)


def auto_steps_per_dispatch(plan: Schedule, samples: int, world: int = 1, cap: int = AUTO_CAP) -> DispatchChoice:
    """The K in 1..``cap`` making the fewest calls over the timed blocks; a tie goes to the smaller K."""
    counted = {group: timed_calls(plan, samples, group, world) for group in range(1, cap + 1)}
    best = min(counted, key=lambda group: (counted[group][0], group))
    calls, steps = counted[best]
    return DispatchChoice(best, f"auto: K={best} fitted to the timing blocks ({calls} calls for {steps} timed steps)")


def choose_steps_per_dispatch(value: int | str, *, blocked: str | None, kind: str, plan: Schedule, samples: int,
                              world: int = 1) -> DispatchChoice:
    """The option resolved: ``blocked`` (the engine's reason it cannot loop) gives 1; an integer wins; else auto.

    Auto loops only on one device of a :data:`LOOP_KINDS` kind, fitted by :func:`auto_steps_per_dispatch`.
    """
    if blocked is not None:
        return DispatchChoice(1, blocked)
    if value != "auto":
        group = max(1, int(value))
        return DispatchChoice(group, f"steps_per_dispatch: {group}" if group > 1 else "one step per call (steps_per_dispatch: 1)")
    if world > 1:
        return DispatchChoice(1, "auto: 1 (several devices: auto loops on one device only)")
    if kind == "cpu":
        return DispatchChoice(1, "auto: 1 (cpu: XLA's CPU while loop runs a step ~4x slower than one call per step)")
    if kind not in LOOP_KINDS:
        return DispatchChoice(1, f"auto: 1 (device kind {kind}: auto loops on {', '.join(LOOP_KINDS)} only)")
    return auto_steps_per_dispatch(plan, samples, world)
