"""Validate an artifact given as a folder or (later) as an archive."""

from __future__ import annotations

from pathlib import Path

from orchestrator.artifacts.validate import ArtifactProblem, validate_artifact


def validate_path(path: Path) -> list[ArtifactProblem]:
    """Problems of the artifact at ``path`` (a folder)."""
    if path.is_dir():
        return validate_artifact(path)
    return [ArtifactProblem(str(path), "not an artifact folder")]
