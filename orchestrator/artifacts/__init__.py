"""Artifacts: one folder per scenario execution, every file listed with its sha256 in manifest.json."""

from orchestrator.artifacts.layout import Artifact, create_artifact, open_artifact
from orchestrator.artifacts.manifest import write_manifest
from orchestrator.artifacts.validate import ArtifactProblem, validate_artifact

__all__ = ["Artifact", "ArtifactProblem", "create_artifact", "open_artifact", "validate_artifact", "write_manifest"]
