"""Per-block training losses for engines whose steps return their losses as arrays (JAX, TensorFlow).

A step (or a several-step call) hands its loss output to :meth:`BlockLosses.add` unread; the
harness's ``block_done`` closes the block; :meth:`BlockLosses.means` reads every output once,
after the last step, and averages each block over its steps (a vector output is one loss per step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BlockLosses:
    """Loss outputs grouped by harness block, kept as the framework returned them (on the device)."""

    _open: list[Any] = field(default_factory=list)
    _closed: list[list[Any]] = field(default_factory=list)

    def add(self, output: Any) -> None:
        """The loss output of one call: a scalar (one step) or a vector (one loss per step)."""
        self._open.append(output)

    def close(self) -> None:
        """End the current block (the harness read the clock)."""
        self._closed.append(self._open)
        self._open = []

    def reset(self) -> None:
        """Forget everything (calls made before the run, e.g. to compile, are not steps of it)."""
        self._open, self._closed = [], []

    def means(self, values: Callable[[Any], Iterable[float]]) -> list[float]:
        """The mean loss of each closed block; ``values`` reads one output as its per-step losses.

        A block without a loss (never in a training run) is NaN, which the orchestrator refuses.
        """
        out = []
        for block in self._closed:
            losses = [float(v) for output in block for v in values(output)]
            out.append(sum(losses) / len(losses) if losses else float("nan"))
        return out
