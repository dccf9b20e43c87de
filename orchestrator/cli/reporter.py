"""Progress of a scenario run on stderr (hyperfine-style: one line per run, live engine tail, ETA).

On a terminal the current run's line shows every rank's phase (orchestrator.cli.phases), the pace
of the phase (steps/s, samples/s, ETA: orchestrator.cli.pace) and the engine's latest log line.
Elsewhere (a log file, CI, ``--json`` with stderr captured) nothing redraws, so the phases are
printed as lines: whenever a rank enters rendezvous, warmup or timing, and at most every
:data:`PLAIN_INTERVAL_S` seconds while steps advance. Every finished run's line ends with the time
the runs left will take at the pace of the runs so far. stdout is never written here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.status import Status

from orchestrator.cli.console import err, print_warning, status_text
from orchestrator.cli.pace import duration_text
from orchestrator.cli.phases import PhaseBoard
from orchestrator.judge.record import RunRecord
from orchestrator.reports.formats import RATE
from orchestrator.scenario import RunPlan
from orchestrator.terminal import markup

PLAIN_INTERVAL_S = 30.0
PLAIN_PHASES = ("rendezvous", "warmup", "timing")  # phases whose start is printed at once without a terminal


class RichReporter:
    """Shows the current run with its ranks' phases, their pace and the engine's latest log line; prints a line per finished run."""

    def __init__(self, quiet: bool = False, verbose: bool = False, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.quiet = quiet
        self.clock = clock  # when a line was read (the pace of a phase)
        self.verbose = verbose
        self.live = err.is_terminal if live is None else live  # redraw a status line, or print phase lines
        self._status: Status | None = None
        self._label = ""
        self._board = PhaseBoard()
        self._samples_per_step = 0
        self._last_line = ""
        self._printed = 0.0
        self._left = 0  # runs after the current one
        self._walls: list[float] = []  # wall seconds of the runs that ran

    def note(self, message: str) -> None:
        if not self.quiet:
            err.print(f"[dim]bench:[/] {markup(message)}")

    def warn(self, message: str) -> None:
        """A warning (hyperfine's ``Warning:``), shown even with --json (stderr)."""
        if not self.quiet:
            print_warning(message)

    def run_started(self, index: int, total: int, plan: RunPlan) -> None:
        self._label = f"[{index}/{total}] {plan.engine} {plan.precision} {plan.path} b{plan.batch} x{plan.devices} #{plan.repeat}"
        self._board = PhaseBoard()
        self._samples_per_step = plan.batch * plan.devices
        self._left = total - index
        self._last_line = ""
        if not self.quiet and self.live:
            self._status = err.status(markup(self._label), spinner="dots")
            self._status.start()

    def progress_text(self) -> str:
        """The ranks' phases and the pace of the slowest: ``timing 150/748  31.2 steps/s (998.4 samples/s), ETA 19s``."""
        phases = self._board.text()
        pace = self._board.pace()
        return f"{phases}  {pace.text(self._samples_per_step)}" if phases and pace else phases

    def engine_line(self, line: str) -> None:
        now = self.clock()
        phase, new_phase = self._board.update(line, now)
        if self.verbose:
            err.print(f"[dim]  | {markup(line)}[/]")
            return
        if self.quiet:
            return
        if phase is None and line.strip():
            self._last_line = line.strip()[:100]
        if self._status is not None:
            progress = self.progress_text()
            shown = f"{markup(self._label)}  {markup(progress)}" if progress else markup(self._label)
            if self._last_line:
                shown += f"  [dim]{markup(self._last_line)}[/]"
            self._status.update(shown)
        elif phase is not None and not self.live and (
                (new_phase and phase.phase in PLAIN_PHASES) or now - self._printed >= PLAIN_INTERVAL_S):
            self._printed = now
            err.print(f"{markup(self._label)}  [dim]{markup(self.progress_text())}[/]")

    def run_finished(self, record: RunRecord) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if record.status != "skipped":
            self._walls.append(float(record.wall_s))
        if self.quiet:
            return
        rate = record.throughput
        detail = f"{RATE(rate)} samples/s" if rate else markup(record.reason or "")
        err.print(f"{markup(self._label)}  {status_text(record.status)}  {detail}  [dim]({record.wall_s:.1f}s{self._time_left()})[/]")

    def _time_left(self) -> str:
        """``; about 12m05s for 11 more runs`` at the mean wall time of the runs so far (empty after the last run)."""
        if not self._left or not self._walls:
            return ""
        estimate = sum(self._walls) / len(self._walls) * self._left
        return f"; about {duration_text(estimate)} for {self._left} more run{'s' if self._left > 1 else ''}"
