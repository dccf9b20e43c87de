"""Integrity of an artifact before bench writes into it again (``bench scenario resume``).

An artifact whose listed files are missing or modified, that holds links, special files, entries
outside the layout or files the manifest does not list (outside the folders it declares in flight),
was changed after bench wrote it: resume refuses it (exit 2), because rewriting the manifest would
make the change pass validation. ``--force`` resumes anyway and records the override, with the problems
found, in ``integrity.json`` (listed in the manifest like every file), which ``bench results show``
and ``bench results validate`` then point out. The unlisted files of a folder in flight are what an
interrupted run left: not counted, and never kept as a measured run (see :mod:`orchestrator.run.resume`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.artifacts.layout import INTEGRITY
from orchestrator.artifacts.validate import TAMPER_KINDS, ArtifactProblem, validate_artifact
from orchestrator.artifacts.walk import read_bytes_no_follow
from orchestrator.clock import utc_now
from orchestrator.errors import BadInput
from orchestrator.jsonio import write_json
from orchestrator.schemas import SchemaError, validate

MAX_RECORDED = 100  # problems recorded per forced resume


def tamper_problems(root: Path) -> list[ArtifactProblem]:
    """The problems that mean the artifact changed after bench wrote it (see the module doc)."""
    return [p for p in validate_artifact(root) if p.kind in TAMPER_KINDS]


def read_integrity(root: Path) -> dict[str, Any] | None:
    """The artifact's integrity record (None when there is none or it is unreadable)."""
    try:
        document = json.loads(read_bytes_no_follow(root, INTEGRITY, 16 << 20))
        validate(document, "integrity")
    except (OSError, ValueError, SchemaError):
        return None
    return document


def record_override(root: Path, action: str, problems: list[ArtifactProblem]) -> None:
    """Append one override (what was forced, when, over which problems) to ``integrity.json``."""
    document = read_integrity(root) or {"schema_version": 1, "overrides": []}
    document["overrides"].append({"at": utc_now(), "action": action, "problems": [str(p) for p in problems[:MAX_RECORDED]],
                                  "problem_count": len(problems)})
    write_json(root / INTEGRITY, document, "integrity")


def check_before_resume(root: Path, force: bool, dry_run: bool = False) -> list[ArtifactProblem]:
    """Refuse (BadInput, exit 2) an artifact whose hashes do not match unless ``force``; when forced
    (and not a dry run) the override is recorded in the artifact. Returns the problems found."""
    problems = tamper_problems(root)
    if not problems:
        return []
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    if not force:
        raise BadInput(f"{root}: refused: the artifact changed since bench wrote it: {problems[0]}{more}; "
                       "see 'bench results validate', or resume with --force (recorded in the artifact)")
    if not dry_run:
        record_override(root, "scenario resume --force", problems)
    return problems
