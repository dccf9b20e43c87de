"""Re-check an artifact folder: manifest schema, every file's hash, every document's schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from orchestrator.artifacts.layout import MANIFEST, SCENARIO, SCHEMA_OF
from orchestrator.artifacts.manifest import file_sha256, listed_files
from orchestrator.schemas import SchemaError, validate


@dataclass(frozen=True)
class ArtifactProblem:
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def _check_document(root: Path, rel: str) -> ArtifactProblem | None:
    name = Path(rel).name
    schema = SCHEMA_OF.get(name) if name != MANIFEST else None
    if name == SCENARIO:
        schema = "scenario"
    if not schema:
        return None
    try:
        text = (root / rel).read_text()
        document = yaml.safe_load(text) if name.endswith(".yaml") else json.loads(text)
        validate(document, schema)
    except SchemaError as exc:
        return ArtifactProblem(rel, f"does not match the {schema} schema: {exc}")
    except (ValueError, yaml.YAMLError) as exc:
        return ArtifactProblem(rel, f"unreadable: {exc.__class__.__name__}")
    return None


def validate_artifact(root: Path) -> list[ArtifactProblem]:
    """Every problem found (empty list: the artifact is intact)."""
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        return [ArtifactProblem(MANIFEST, "missing")]
    try:
        manifest = json.loads(manifest_path.read_text())
        validate(manifest, "manifest")
    except (ValueError, SchemaError) as exc:
        return [ArtifactProblem(MANIFEST, f"invalid: {exc}")]
    problems: list[ArtifactProblem] = []
    listed = {entry["path"]: entry for entry in manifest["files"]}
    for rel, entry in listed.items():
        path = root / rel
        if not path.resolve().is_relative_to(root.resolve()):
            problems.append(ArtifactProblem(rel, "points outside the artifact"))
            continue
        if not path.is_file():
            problems.append(ArtifactProblem(rel, "listed in the manifest but missing"))
            continue
        if path.stat().st_size != entry["bytes"] or file_sha256(path) != entry["sha256"]:
            problems.append(ArtifactProblem(rel, "sha256 differs from the manifest (modified)"))
            continue
        problem = _check_document(root, rel)
        if problem:
            problems.append(problem)
    for path in listed_files(root):
        rel = path.relative_to(root).as_posix()
        if rel not in listed:
            problems.append(ArtifactProblem(rel, "not listed in the manifest"))
    return problems
