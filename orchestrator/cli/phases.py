"""The engines' phase lines (bench_engine.progress), gathered per rank for the progress display.

An engine process prints ``[bench-engine] phase warmup 5/20``; the launcher of a data-parallel
run relays each worker's as ``[rank 1] [bench-engine] phase warmup 5/20``. :class:`PhaseBoard`
keeps the latest phase of every rank and renders them as one line: ``rank 0: warmup 5/20,
rank 1: warmup 4/20`` (or ``warmup 5/20`` for a single process), and the pace of the slowest
rank (orchestrator.cli.pace): steps per second and the ETA of its phase.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from orchestrator.cli.pace import Mark, Pace
from orchestrator.host.phase_lines import PhaseLine, parse

__all__ = ["PhaseBoard", "PhaseLine", "parse"]

PACED_AFTER_FIRST_STEP = frozenset({"warmup"})  # the first step of these includes compilation: paced from it on


@dataclass
class PhaseBoard:
    """The latest phase of every rank of the current run, and where each rank's pace is taken from."""

    ranks: dict[int | None, PhaseLine] = field(default_factory=dict)
    marks: dict[int | None, tuple[Mark, Mark]] = field(default_factory=dict)  # (first, latest) of the rank's phase

    def update(self, line: str, now: float | None = None) -> tuple[PhaseLine | None, bool]:
        """Take one engine line (read at ``now``, monotonic seconds): (its phase line or None, whether a rank entered a new phase)."""
        parsed = parse(line)
        if parsed is None:
            return None, False
        at = time.monotonic() if now is None else now
        previous = self.ranks.get(parsed.rank)
        self.ranks[parsed.rank] = parsed
        new_phase = previous is None or previous.phase != parsed.phase
        mark = Mark(parsed.done or 0, at)
        first = self.marks.get(parsed.rank, (mark, mark))[0]
        restart = new_phase or mark.done < first.done or (first.done == 0 and parsed.phase in PACED_AFTER_FIRST_STEP)
        self.marks[parsed.rank] = (mark if restart else first, mark)
        return parsed, new_phase

    def text(self) -> str:
        """``rank 0: warmup 5/20, rank 1: warmup 4/20`` (``warmup 5/20`` for one process); empty before any line."""
        keys = sorted(self.ranks, key=lambda rank: -1 if rank is None else rank)
        return ", ".join(self.ranks[k].text() if k is None else f"rank {k}: {self.ranks[k].text()}" for k in keys)

    def pace(self) -> Pace | None:
        """The pace of the rank that will end its phase last (None before any rank has timed a step)."""
        paces = [Pace.between(first, last, self.ranks[rank].total or 0) for rank, (first, last) in self.marks.items()
                 if self.ranks[rank].total]
        known = [p for p in paces if p is not None]
        return max(known, key=lambda p: p.eta_s) if known else None
