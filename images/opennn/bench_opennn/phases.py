"""The OpenNN driver's phases as bench's phase lines (bench_engine.progress), read from its events file as it grows.

The driver runs the plan's blocks itself, so the adapter does not pass through bench_engine's harness, which says
the phases of every other engine. :class:`EventPhases` follows the events file while the driver runs and tells
this process's heartbeat what the lines show: setup until ``setup_done``, then warmup until the plan's warmup steps
are done, then timing until ``done``. A block's line is written when the block ends, after the driver's device
synchronisation (bench::Trainer::run), so the line that completes the warmup marks the start of the timed steps as
closely as the polling interval (``POLL_S``) allows. With these lines bench's progress display shows OpenNN's
phases, and GPU telemetry measures its steady-window energy like any engine's (README, "GPU telemetry").
"""

from __future__ import annotations

from pathlib import Path

from bench_engine.progress import Heartbeat, current
from bench_opennn.events import DriverEvents, read_event

POLL_S = 0.02  # how often the adapter looks at the events file while the driver runs


class EventPhases:
    """Follows the events file at ``path`` of a plan with ``warmup_steps`` then ``timed_steps`` steps."""

    def __init__(self, path: Path, warmup_steps: int, timed_steps: int, heartbeat: Heartbeat | None = None) -> None:
        self.path = path
        self.warmup_left = warmup_steps
        self.warmup_steps, self.timed_steps = warmup_steps, timed_steps
        self.beat = heartbeat or current()
        self.events = DriverEvents()  # what the lines read so far say (bench_opennn.events)
        self._offset = 0
        self._partial = b""

    def poll(self) -> None:
        """Read what the driver has written since the last poll and say the phases it shows (never raises)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            self._event(line.decode("utf-8", "replace"))

    def _event(self, line: str) -> None:
        events = self.events
        had_setup, blocks, had_done = events.setup_done is not None, len(events.blocks), events.done
        read_event(events, line)
        if events.setup_done is not None and not had_setup:
            self._after_warmup() if self.warmup_left <= 0 else self.beat.phase("warmup", self.warmup_steps)
        for block in events.blocks[blocks:]:
            self.beat.step(block["steps"])
            if block["warmup"]:
                self.warmup_left -= block["steps"]
                if self.warmup_left <= 0:
                    self._after_warmup()
        if events.done and not had_done:
            self.beat.phase("done")

    def _after_warmup(self) -> None:
        if self.beat.phase_name != "timing":
            self.beat.phase("timing", self.timed_steps)
