"""Whether an artifact's summary speaks for all of it.

bench writes ``summary.json`` when a scenario run or a resume finishes (:func:`orchestrator.run.finish.finish`), the
manifest before and after every run. A copy taken while a resume was running (a campaign's files copied back from a
device mid-run), or an artifact whose bench was killed, holds a manifest that lists the run in flight and run
folders newer than the summary: the summary, from the run or resume before, counts those runs as not started.
``bench scenario resume`` counts them and finishes the rest; until then these warnings say so, so that the tables
are not read as the whole artifact.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.artifacts.layout import MANIFEST
from orchestrator.artifacts.validate import MAX_DOCUMENT_BYTES
from orchestrator.artifacts.walk import read_bytes_no_follow
from orchestrator.judge.record_file import read_record
from orchestrator.judge.summary_model import Summary

SHOWN = 3  # run ids named in a warning before "+N more"


def in_flight_folders(root: Path) -> list[str]:
    """The folders the manifest says were being written (none when it is unreadable: validation reports that)."""
    try:
        manifest = json.loads(read_bytes_no_follow(root, MANIFEST, MAX_DOCUMENT_BYTES))
    except (OSError, ValueError, RecursionError):
        return []
    flying = manifest.get("in_flight") if isinstance(manifest, dict) else None
    return [str(f) for f in flying] if isinstance(flying, list) else []


def uncounted_runs(root: Path, summary: Summary) -> list[str]:
    """Runs the summary counts as not started whose run record says they ran: written after the summary."""
    late = []
    for row in summary.runs:
        if row.status == "skipped":
            record = read_record(root, row.run_id)
            if record is not None and record.status != "skipped":
                late.append(row.run_id)
    return late


def _named(ids: list[str]) -> str:
    more = f" +{len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
    return ", ".join(ids[:SHOWN]) + more


def progress_warnings(root: Path, summary: Summary) -> list[str]:
    """One line for a run in flight, one for runs the summary does not count yet; none for a sealed artifact."""
    warnings = []
    flying = in_flight_folders(root)
    if flying:
        warnings.append(f"this artifact was copied, or its bench stopped, while {_named(flying)} was being written; "
                        f"`bench scenario resume {root}` finishes it")
    late = uncounted_runs(root, summary)
    if late:
        warnings.append(f"{len(late)} run(s) written after this summary are counted as not started in it "
                        f"({_named(late)}); `bench scenario resume` counts them")
    return warnings
