"""One run's ``run.json`` in an artifact folder, read without following links, as a :class:`RunRecord`."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.artifacts.layout import RUNS
from orchestrator.artifacts.validate import MAX_DOCUMENT_BYTES
from orchestrator.artifacts.walk import read_bytes_no_follow
from orchestrator.judge.record import RunRecord


def read_record(root: Path, run_id: str) -> RunRecord | None:
    """The run record of ``run_id`` in a (validated) artifact, read without following links; None when unreadable."""
    try:
        return RunRecord.from_json(json.loads(read_bytes_no_follow(root, f"{RUNS}/{run_id}/run.json", MAX_DOCUMENT_BYTES)))
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None
