"""How fast a phase advances and when it will end, from two of its phase lines (hyperfine's ETA).

The rate is taken from the phase's first line (for warmup, its first finished step: compilation
and graph capture come before it) to its latest one; the ETA is the steps left at that rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.reports.formats import RATE

MIN_PACE_S = 1.0  # a rate over less time than this is noise (two lines read together), not shown


@dataclass(frozen=True)
class Mark:
    """A rank's step count of a phase at a moment (time.monotonic seconds)."""

    done: int
    at: float


@dataclass(frozen=True)
class Pace:
    """Steps per second and the seconds left of a phase of ``total`` steps."""

    rate: float
    eta_s: float

    @classmethod
    def between(cls, first: Mark, last: Mark, total: int) -> Pace | None:
        """The pace from ``first`` to ``last``, or None before a step has been timed over :data:`MIN_PACE_S`."""
        elapsed, steps = last.at - first.at, last.done - first.done
        if elapsed < MIN_PACE_S or steps <= 0:
            return None
        rate = steps / elapsed
        return cls(rate, max(total - last.done, 0) / rate)

    def text(self, samples_per_step: int | None = None) -> str:
        """``12.5 steps/s (400.0 samples/s), ETA 1m05s``."""
        samples = f" ({RATE(self.rate * samples_per_step)} samples/s)" if samples_per_step else ""
        return f"{RATE(self.rate)} steps/s{samples}, ETA {duration_text(self.eta_s)}"


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: ``42s``, ``3m05s``, ``2h07m``, ``3d04h``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
