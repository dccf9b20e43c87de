"""Bounded failure: noticing a process that stopped making progress, showing where it hung, ending it.

Progress is a heartbeat (bench_engine.progress: a phase change or a finished step) or a line of
output. A process in ``warmup`` or ``timing`` may go ``measurement.stall_s`` seconds without
progress, one in ``setup`` or ``rendezvous`` ``measurement.setup_stall_s``; past that it has
stalled. Every engine process registers :func:`enable_stack_dumps`, so SIGUSR1 prints the Python
stack of each of its threads on stderr (faulthandler, which works while a thread is blocked in C
code such as a collective): that is where the run hung.

- Launched workers (bench_engine.launch): the launcher polls every worker's heartbeat record
  (:class:`RankWatch`); on a stall it asks every worker for its stacks, then ends every worker
  and its children (:func:`kill_tree`) and reports the stalled rank and phase.
- A single-process engine (JAX mesh, TensorFlow, any one-device run): :class:`SelfWatch`, a
  thread of the process itself, dumps the stacks, writes the failed result and exits; a C-level
  faulthandler timer is the backstop when that thread cannot run.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_engine.progress import Heartbeat, Snapshot, bound_for, read_record

STACK_SIGNAL = getattr(signal, "SIGUSR1", None)
DUMP_WAIT_S = 2.0  # after asking for the stacks, before ending the processes
BACKSTOP_MARGIN_S = 60.0  # the C-level timer fires this long after the Python watchdog should have


def enable_stack_dumps() -> None:
    """SIGUSR1 prints every thread's Python stack on stderr (where a hung process is)."""
    if STACK_SIGNAL is not None:
        faulthandler.register(STACK_SIGNAL, file=sys.stderr, all_threads=True, chain=False)


# ----------------------------------------------------------------------------- ending a process tree


def _children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids, read from /proc (empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return children
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, grandchildren...), parents first."""
    tree = _children_map()
    found, queue = [], list(tree.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(tree.get(child, []))
    return found


def kill_tree(pids: list[int], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to every process in ``pids`` and below them (children listed before the parents die)."""
    targets = []
    for pid in pids:
        targets.extend([pid, *descendants(pid)])
    for pid in targets:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


# ----------------------------------------------------------------------------- launched workers


@dataclass
class RankState:
    """What the launcher knows of one worker's progress."""

    rank: int
    record: Path
    snapshot: Snapshot
    last_progress: float


class RankWatch:
    """The launcher's view of its workers' heartbeats; says which rank stalled first."""

    def __init__(self, records: list[Path], stall_s: float, setup_stall_s: float) -> None:
        now = time.monotonic()
        self.stall_s, self.setup_stall_s = stall_s, setup_stall_s
        self.ranks = [RankState(rank, path, Snapshot("start", 0, 0, 0), now) for rank, path in enumerate(records)]

    def output(self, rank: int) -> None:
        """Rank ``rank`` printed a line: it is alive."""
        self.ranks[rank].last_progress = time.monotonic()

    def poll(self, running: set[int]) -> list[RankState]:
        """Read every record; return the stalled ranks among ``running`` to blame (empty: none stalled).

        In a collective every rank stops: the ranks behind the others (earliest phase, fewest steps)
        are blamed, all of them when several are equally far (only their stacks can tell them apart).
        Ranks that stopped together cross the limit a moment apart, so once one rank is past it, every
        running rank idle for more than half its limit counts as stalled too.
        """
        now = time.monotonic()
        for state in self.ranks:
            snapshot = read_record(state.record)
            if snapshot is not None and snapshot.beats != state.snapshot.beats:
                state.snapshot, state.last_progress = snapshot, now
        live = [state for state in self.ranks if state.rank in running]
        if not any(now - state.last_progress > self.bound(state) for state in live):
            return []
        stalled = [state for state in live if now - state.last_progress > self.bound(state) / 2]
        behind = min(_order(s.snapshot) for s in stalled)
        return [s for s in stalled if _order(s.snapshot) == behind]

    def bound(self, state: RankState) -> float:
        return bound_for(state.snapshot.phase, self.stall_s, self.setup_stall_s)

    def stall_message(self, culprits: list[RankState], world: int) -> str:
        """The failure message: the stalled ranks, their phase and step, and where every other rank is."""
        now = time.monotonic()
        first = culprits[0]
        setting = "measurement.stall_s" if self.bound(first) == self.stall_s else "measurement.setup_stall_s"
        who = f"rank {first.rank}" if len(culprits) == 1 else "ranks " + ", ".join(str(c.rank) for c in culprits)
        idle = min(now - c.last_progress for c in culprits)
        text = (f"{who} of {world} stalled in {first.snapshot.phase}: no progress for {idle:.0f} s "
                f"(limit {setting} = {self.bound(first):g} s)")
        if first.snapshot.total:
            text += f" after step {first.snapshot.done}/{first.snapshot.total} of the phase"
        others = [f"rank {s.rank} {s.snapshot.text()} (last progress {now - s.last_progress:.0f} s ago)"
                  for s in self.ranks if s not in culprits]
        if others:
            text += "; " + ", ".join(others)
        return text + "; the engine log has every rank's Python stacks"


def _order(snapshot: Snapshot) -> tuple[int, int]:
    from bench_engine.progress import PHASES

    return (PHASES.index(snapshot.phase), snapshot.done)


# ----------------------------------------------------------------------------- a single process


class SelfWatch:
    """A watchdog thread over this process's own heartbeat: on a stall, dump, report, exit.

    ``on_stall(message)`` writes the failed result; the process then exits with code 1. The
    faulthandler timer (re-armed at every phase line) dumps the stacks and exits even when the
    thread never gets to run (a C call holding the GIL).
    """

    def __init__(self, heartbeat: Heartbeat, stall_s: float, setup_stall_s: float,
                 on_stall: Callable[[str], None], poll_s: float = 0.5) -> None:
        self.heartbeat, self.stall_s, self.setup_stall_s = heartbeat, stall_s, setup_stall_s
        self.on_stall, self.poll_s = on_stall, poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-stall-watch", daemon=True)
        self._armed_beats = -1

    def start(self) -> SelfWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        faulthandler.cancel_dump_traceback_later()

    def _bound(self) -> float:
        return bound_for(self.heartbeat.phase_name, self.stall_s, self.setup_stall_s)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            snapshot, bound = self.heartbeat.snapshot(), self._bound()
            if snapshot.beats != self._armed_beats:  # progress: move the C-level backstop on
                self._armed_beats = snapshot.beats
                faulthandler.dump_traceback_later(bound + BACKSTOP_MARGIN_S, exit=True, file=sys.stderr)
            idle = time.monotonic() - self.heartbeat.last_progress
            if idle > bound and not self._stop.is_set():
                self._fire(snapshot, idle, bound)
                return

    def _fire(self, snapshot: Snapshot, idle: float, bound: float) -> None:
        setting = "measurement.stall_s" if bound == self.stall_s else "measurement.setup_stall_s"
        message = f"stalled in {snapshot.phase}: no progress for {idle:.0f} s (limit {setting} = {bound:g} s)"
        if snapshot.total:
            message += f" after step {snapshot.done}/{snapshot.total} of the phase"
        print(f"[bench-engine] {message}; Python stacks of every thread:", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        try:
            self.on_stall(message + "; the engine log has the Python stacks")
        finally:
            sys.stderr.flush()
            os._exit(1)
