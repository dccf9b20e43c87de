"""Terminal output: one Rich console for data (stdout) and one for messages (stderr)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

from orchestrator.terminal import markup

_WIDE = 160  # when not attached to a terminal (logs, CI), do not wrap tables at 80 columns
out = Console(highlight=False, width=None if sys.stdout.isatty() else _WIDE)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else _WIDE)

STATUS_STYLE = {"ok": "green", "invalid": "yellow", "failed": "red", "timeout": "red", "interrupted": "magenta", "skipped": "dim",
                "B faster": "green", "B slower": "red"}  # run statuses, and the verdicts of `bench results compare`


def print_json(document: Any) -> None:
    """Machine-readable output for --json: plain JSON on stdout."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()


def status_text(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{markup(status)}[/]"


