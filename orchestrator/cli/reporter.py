"""Progress of a scenario run on the terminal (hyperfine-style: one line per run, live engine tail)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.status import Status

from orchestrator.cli.console import err, fmt_rate, status_text
from orchestrator.scenario import RunPlan


class RichReporter:
    """Shows the current run with the engine's latest log line; prints a line per finished run."""

    def __init__(self, quiet: bool = False, verbose: bool = False):
        self.quiet = quiet
        self.verbose = verbose
        self._status: Status | None = None
        self._label = ""

    def note(self, message: str) -> None:
        if not self.quiet:
            err.print(f"[dim]bench:[/] {escape(message)}")

    def run_started(self, index: int, total: int, plan: RunPlan) -> None:
        self._label = f"[{index}/{total}] {plan.engine} {plan.precision} {plan.path} b{plan.batch} x{plan.devices} #{plan.repeat}"
        if not self.quiet:
            self._status = err.status(escape(self._label), spinner="dots")
            self._status.start()

    def engine_line(self, line: str) -> None:
        if self.verbose:
            err.print(f"[dim]  | {escape(line)}[/]")
        elif self._status is not None and line.strip():
            self._status.update(f"{escape(self._label)}  [dim]{escape(line.strip()[:100])}[/]")

    def run_finished(self, record: dict[str, Any]) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self.quiet:
            return
        rate = record.get("throughput")
        detail = f"{fmt_rate(rate)} samples/s" if rate else escape(record.get("reason") or "")
        err.print(f"{escape(self._label)}  {status_text(record['status'])}  {detail}  [dim]({record['wall_s']:.1f}s)[/]")
