"""The engines' phase lines (bench_engine.progress), gathered per rank for the progress display.

An engine process prints ``[bench-engine] phase warmup 5/20``; the launcher of a data-parallel
run relays each worker's as ``[rank 1] [bench-engine] phase warmup 5/20``. :class:`PhaseBoard`
keeps the latest phase of every rank and renders them as one line: ``rank 0: warmup 5/20,
rank 1: warmup 4/20`` (or ``warmup 5/20`` for a single process).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PHASE_LINE = re.compile(r"^(?:\[rank (?P<rank>\d+)\] )?\[bench-engine\] phase (?P<phase>[a-z]+)(?: (?P<done>\d+)/(?P<total>\d+))?\s*$")


@dataclass(frozen=True)
class PhaseLine:
    """One parsed phase line."""

    rank: int | None
    phase: str
    done: int | None = None
    total: int | None = None

    def text(self) -> str:
        return f"{self.phase} {self.done}/{self.total}" if self.total else self.phase


def parse(line: str) -> PhaseLine | None:
    """The phase line in ``line``, or None when it is another line."""
    match = PHASE_LINE.match(line.strip())
    if match is None:
        return None
    rank, done, total = match["rank"], match["done"], match["total"]
    return PhaseLine(int(rank) if rank is not None else None, match["phase"],
                     int(done) if done is not None else None, int(total) if total is not None else None)


@dataclass
class PhaseBoard:
    """The latest phase of every rank of the current run."""

    ranks: dict[int | None, PhaseLine] = field(default_factory=dict)

    def update(self, line: str) -> tuple[PhaseLine | None, bool]:
        """Take one engine line: (its phase line or None, whether a rank entered a new phase)."""
        parsed = parse(line)
        if parsed is None:
            return None, False
        previous = self.ranks.get(parsed.rank)
        self.ranks[parsed.rank] = parsed
        return parsed, previous is None or previous.phase != parsed.phase

    def text(self) -> str:
        """``rank 0: warmup 5/20, rank 1: warmup 4/20`` (``warmup 5/20`` for one process); empty before any line."""
        keys = sorted(self.ranks, key=lambda rank: -1 if rank is None else rank)
        return ", ".join(self.ranks[k].text() if k is None else f"rank {k}: {self.ranks[k].text()}" for k in keys)
