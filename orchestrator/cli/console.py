"""Terminal output: one Rich console for data (stdout) and one for messages (stderr)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from rich.console import Console

from orchestrator.terminal import markup

_WIDE = 160  # when not attached to a terminal (logs, CI) and $COLUMNS is unset, do not wrap tables at 80 columns


def _width(stream: TextIO) -> int | None:
    """None (the terminal's width, or $COLUMNS when set) on a terminal or with $COLUMNS; else 160."""
    return None if stream.isatty() or os.environ.get("COLUMNS", "").isdigit() else _WIDE


out = Console(highlight=False, width=_width(sys.stdout))
err = Console(stderr=True, highlight=False, width=_width(sys.stderr))

STATUS_STYLE = {"ok": "green", "invalid": "yellow", "failed": "red", "timeout": "red", "interrupted": "magenta", "skipped": "dim",
                "incomplete": "magenta",  # an artifact (`bench results list`)
                "B faster": "green", "B slower": "red",  # run statuses, and the verdicts of `bench results compare`
                "yes": "green", "no": "red",  # usable engines (`bench env`)
                "built": "green", "not built": "yellow", "built, not in lock": "yellow", "built, differs from lock": "yellow",
                "unknown (daemon unreachable)": "yellow"}  # images (`bench image list`)


def print_json(document: Any) -> None:
    """Machine-readable output for --json: plain JSON on stdout."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()


def print_warning(message: str) -> None:
    """A warning line on stderr (hyperfine's ``Warning:``), whatever --json says."""
    err.print(f"[yellow]warning:[/] {markup(message)}", soft_wrap=True)


def status_text(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{markup(status)}[/]"


