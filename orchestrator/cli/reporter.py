"""Progress of a scenario run on the terminal (hyperfine-style: one line per run, live engine tail).

On a terminal the current run's line shows every rank's phase (orchestrator.cli.phases) and the
engine's latest log line. Elsewhere (a log file, CI) nothing redraws, so the phases are printed
as lines: whenever a rank enters rendezvous, warmup or timing, and at most every
:data:`PLAIN_INTERVAL_S` seconds while steps advance.
"""

from __future__ import annotations

import time
from typing import Any

from rich.status import Status

from orchestrator.cli.console import err, status_text
from orchestrator.cli.phases import PhaseBoard
from orchestrator.reports.formats import RATE
from orchestrator.scenario import RunPlan
from orchestrator.terminal import markup

PLAIN_INTERVAL_S = 30.0
PLAIN_PHASES = ("rendezvous", "warmup", "timing")  # phases whose start is printed at once without a terminal


class RichReporter:
    """Shows the current run with its ranks' phases and the engine's latest log line; prints a line per finished run."""

    def __init__(self, quiet: bool = False, verbose: bool = False, live: bool | None = None):
        self.quiet = quiet
        self.verbose = verbose
        self.live = err.is_terminal if live is None else live  # redraw a status line, or print phase lines
        self._status: Status | None = None
        self._label = ""
        self._board = PhaseBoard()
        self._last_line = ""
        self._printed = 0.0

    def note(self, message: str) -> None:
        if not self.quiet:
            err.print(f"[dim]bench:[/] {markup(message)}")

    def run_started(self, index: int, total: int, plan: RunPlan) -> None:
        self._label = f"[{index}/{total}] {plan.engine} {plan.precision} {plan.path} b{plan.batch} x{plan.devices} #{plan.repeat}"
        self._board = PhaseBoard()
        self._last_line = ""
        if not self.quiet and self.live:
            self._status = err.status(markup(self._label), spinner="dots")
            self._status.start()

    def engine_line(self, line: str) -> None:
        phase, new_phase = self._board.update(line)
        if self.verbose:
            err.print(f"[dim]  | {markup(line)}[/]")
            return
        if self.quiet:
            return
        if phase is None and line.strip():
            self._last_line = line.strip()[:100]
        if self._status is not None:
            phases = self._board.text()
            shown = f"{markup(self._label)}  {markup(phases)}" if phases else markup(self._label)
            if self._last_line:
                shown += f"  [dim]{markup(self._last_line)}[/]"
            self._status.update(shown)
        elif phase is not None and not self.live and (
                (new_phase and phase.phase in PLAIN_PHASES) or time.monotonic() - self._printed >= PLAIN_INTERVAL_S):
            self._printed = time.monotonic()
            err.print(f"{markup(self._label)}  [dim]{markup(self._board.text())}[/]")

    def run_finished(self, record: dict[str, Any]) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self.quiet:
            return
        rate = record.get("throughput")
        detail = f"{RATE(rate)} samples/s" if rate else markup(record.get("reason") or "")
        err.print(f"{markup(self._label)}  {status_text(record['status'])}  {detail}  [dim]({record['wall_s']:.1f}s)[/]")
