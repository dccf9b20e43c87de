"""Where a run is: phase lines a user reads, a heartbeat a watcher checks.

Every engine process (a launched worker, or the one process of a single-process engine) has one
:class:`Heartbeat` (:func:`current`). The entrypoint, the harness and the engines tell it the phase:

    setup       from the start: the dataset, the model, compilation ahead of time (JAX, TensorFlow)
    rendezvous  joining the other workers (PyTorch's process group, NCCL communicators)
    warmup      the warmup steps: compilation on first use, CUDA graph capture, autotuning
    timing      the timed steps
    done        after the last step: the result is being written

and every finished step (``step``, the hot path: a counter, a clock read and, for a launched
worker, a 32-byte write into a memory-mapped file, no system call). A phase line goes to stderr
at every change of phase, at the first warmup step (compilation and graph capture are over), at the
last step of a phase and otherwise at most every :data:`LINE_INTERVAL_S` seconds::

    [bench-engine] phase warmup 5/20

The launcher relays a worker's lines as ``[rank r] [bench-engine] phase ...``; bench's progress
display shows them per rank. The memory-mapped record (``BENCH_HEARTBEAT``: phase, steps done,
steps of the phase, a counter bumped at every beat) lets the launcher see which rank stopped
making progress (bench_engine.watch).
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bench_engine.contract import MeasurementPlan

HEARTBEAT_ENV = "BENCH_HEARTBEAT"
PHASES = ("start", "setup", "rendezvous", "warmup", "timing", "done")
SETUP_PHASES = ("start", "setup", "rendezvous", "done")  # bounded by measurement.setup_stall_s
LINE_PREFIX = "[bench-engine] phase "
LINE_INTERVAL_S = {"warmup": 1.0, "timing": 5.0}  # between two lines of one phase (others: every change only)
SAY_FIRST_STEP = frozenset({"warmup"})  # phases whose first finished step is always said
RECORD = struct.Struct("<QQQQ")  # phase index, steps done, steps of the phase, beat counter
DEFAULT_STALL_S = 300.0  # measurement.stall_s: no progress for this long after setup fails the run
DEFAULT_SETUP_STALL_S = 900.0  # measurement.setup_stall_s: the same bound for setup and rendezvous


@dataclass(frozen=True)
class Snapshot:
    """A heartbeat as read by a watcher."""

    phase: str
    done: int
    total: int
    beats: int

    def text(self) -> str:
        return f"{self.phase} {self.done}/{self.total}" if self.total else self.phase


def stall_bounds(measurement: MeasurementPlan) -> tuple[float, float]:
    """(stall_s, setup_stall_s) of a run spec's measurement plan (the defaults where it does not set them)."""
    return (float(measurement.stall_s or DEFAULT_STALL_S), float(measurement.setup_stall_s or DEFAULT_SETUP_STALL_S))


def bound_for(phase: str, stall_s: float, setup_stall_s: float) -> float:
    """How long a process in ``phase`` may go without progress."""
    return setup_stall_s if phase in SETUP_PHASES else stall_s


class Heartbeat:
    """This process's phase and step count, printed as phase lines and kept in a shared record."""

    def __init__(self, record: Path | None = None, out: TextIO | None = None) -> None:
        self.out = out
        self.phase_name = "start"
        self.done = 0
        self.total = 0
        self.beats = 0
        self.last_progress = time.monotonic()
        self._index = 0
        self._interval = 0.0
        self._emitted = 0.0
        self._map: mmap.mmap | None = None
        if record is not None:
            with open(record, "r+b") as handle:
                self._map = mmap.mmap(handle.fileno(), RECORD.size)

    def phase(self, name: str, total: int = 0) -> None:
        """Enter phase ``name`` (of ``total`` steps, 0 when it has none) and say so."""
        self.phase_name, self._index = name, PHASES.index(name)
        self.done, self.total = 0, int(total)
        self._interval = LINE_INTERVAL_S.get(name, float("inf"))
        self._beat()
        self._emit()

    def step(self, count: int = 1) -> None:
        """``count`` steps of the phase finished (dispatched; the harness syncs at every window)."""
        first = self.done == 0
        self.done += count
        self._beat()
        # the first warmup step ends compilation and graph capture: said at once, whatever the interval
        if self.done >= self.total or (first and self.phase_name in SAY_FIRST_STEP) or self.last_progress - self._emitted >= self._interval:
            self._emit()

    def snapshot(self) -> Snapshot:
        return Snapshot(self.phase_name, self.done, self.total, self.beats)

    def _beat(self) -> None:
        self.beats += 1
        self.last_progress = time.monotonic()
        if self._map is not None:
            RECORD.pack_into(self._map, 0, self._index, self.done, self.total, self.beats)

    def _emit(self) -> None:
        self._emitted = self.last_progress
        out = self.out or sys.stderr
        out.write(f"{LINE_PREFIX}{self.snapshot().text()}\n")
        out.flush()


def new_record(path: Path) -> Path:
    """Create the zeroed record file a worker's heartbeat maps (the launcher's side)."""
    path.write_bytes(bytes(RECORD.size))
    return path


def read_record(path: Path) -> Snapshot | None:
    """A worker's heartbeat record, or None when it cannot be read."""
    try:
        raw = path.read_bytes()
        index, done, total, beats = RECORD.unpack_from(raw)
        return Snapshot(PHASES[index], done, total, beats)
    except (OSError, struct.error, IndexError):
        return None


_CURRENT: Heartbeat | None = None


def current() -> Heartbeat:
    """This process's heartbeat (its record is ``$BENCH_HEARTBEAT`` when a launcher watches it: only in a
    launched worker, and only a regular file of the record's size, the one the launcher made)."""
    global _CURRENT
    if _CURRENT is None:
        record = os.environ.get(HEARTBEAT_ENV) if os.environ.get("BENCH_WORKER") == "1" else None
        try:
            _CURRENT = Heartbeat(Path(record) if record and is_record(Path(record)) else None)
        except (OSError, ValueError):
            _CURRENT = Heartbeat()
    return _CURRENT


def is_record(path: Path) -> bool:
    """Is ``path`` a heartbeat record a launcher made: ``*.heartbeat``, a regular file (not a link) of RECORD.size bytes."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return path.name.endswith(".heartbeat") and stat.S_ISREG(info.st_mode) and info.st_size == RECORD.size


def phase(name: str, total: int = 0) -> None:
    """Enter phase ``name`` on this process's heartbeat (for engines: ``progress.phase("rendezvous")``)."""
    current().phase(name, total)
