"""The engines' phase lines (bench_engine.progress) as bench reads them, and when each run's timing phase ran.

An engine process prints ``[bench-engine] phase warmup 5/20``; the launcher of a data-parallel run relays
each worker's as ``[rank 1] [bench-engine] phase warmup 5/20``. :func:`parse` reads one such line;
:class:`TimingPhases` notes, on the host's monotonic clock as the lines arrive, when the engine entered its
timing phase and when it left it (the harness enters it after the warmup's last synchronisation and leaves it
after the last timed window's): the steady window that GPU telemetry integrates the energy over.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PHASE_LINE = re.compile(r"^(?:\[rank (?P<rank>\d+)\] )?\[bench-engine\] phase (?P<phase>[a-z]+)(?: (?P<done>\d+)/(?P<total>\d+))?\s*$")
TIMING = "timing"


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


Span = tuple[float, float]


@dataclass
class TimingPhases:
    """The spans (monotonic seconds) in which the engine was in its timing phase, read from its phase lines.

    Only the single process's lines count, or rank 0's in a data-parallel run (its ranks step together)."""

    clock: Callable[[], float] = time.monotonic
    _spans: list[Span] = field(default_factory=list)
    _open: float | None = None

    def line(self, text: str) -> None:
        """Take one engine line, as it arrives."""
        parsed = parse(text)
        if parsed is None or parsed.rank not in (None, 0):
            return
        if parsed.phase == TIMING:
            if self._open is None:
                self._open = self.clock()
        elif self._open is not None:
            self._spans.append((self._open, self.clock()))
            self._open = None

    def spans(self, end: float) -> tuple[Span, ...]:
        """Every timing span; one still open (the engine stopped inside it) ends at ``end``."""
        return (*self._spans, (self._open, end)) if self._open is not None else tuple(self._spans)
