"""Re-check an artifact folder: manifest schema, every file's hash, every document's schema, and
nothing but the listed files: every other entry (dot-files, links, FIFOs, devices) is a problem, as
is every folder or name outside the layout (:func:`orchestrator.artifacts.layout.layout_problem`).

Nothing here follows a link: the folder is walked with ``lstat`` and files are opened with
``O_NOFOLLOW`` at every step (see :mod:`orchestrator.artifacts.walk`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from orchestrator.artifacts.layout import MANIFEST, SCENARIO, SCHEMA_OF, layout_problem, omittable
from orchestrator.artifacts.manifest import in_flight
from orchestrator.artifacts.walk import Entry, open_no_follow, read_bytes_no_follow, walk
from orchestrator.schemas import SchemaError, validate

MAX_DOCUMENT_BYTES = 256 << 20  # a JSON document of an artifact larger than this is not read

# kinds of problem: what resume's integrity check counts as tampering (all but "schema" and "other"):
# a file outside the folders the manifest declares in flight that it does not list was not written by bench
TAMPER_KINDS = frozenset({"manifest", "missing", "modified", "link", "special", "unlisted", "layout"})


@dataclass(frozen=True)
class ArtifactProblem:
    path: str
    problem: str
    kind: str = "other"  # manifest | missing | modified | link | special | unlisted | layout | schema | other

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def sha256_no_follow(root: Path, rel: str) -> tuple[int, str]:
    """(bytes, sha256) of ``root/rel``, read without following any link."""
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(open_no_follow(root, rel), "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _check_document(root: Path, rel: str) -> ArtifactProblem | None:
    name = Path(rel).name
    schema = SCHEMA_OF.get(name) if name != MANIFEST else None
    if name == SCENARIO:
        schema = "scenario"
    if not schema:
        return None
    try:
        text = read_bytes_no_follow(root, rel, MAX_DOCUMENT_BYTES).decode("utf-8")
        if name.endswith(".yaml"):
            from orchestrator.scenario.safe_yaml import load_bounded

            document = load_bounded(text)
        else:
            document = json.loads(text)
        validate(document, schema)
    except SchemaError as exc:
        return ArtifactProblem(rel, f"does not match the {schema} schema: {exc}", "schema")
    except (ValueError, yaml.YAMLError, OSError, RecursionError) as exc:
        return ArtifactProblem(rel, f"unreadable: {exc.__class__.__name__}", "schema")
    return None


def read_manifest(root: Path, entries: dict[str, Entry]) -> tuple[dict | None, list[ArtifactProblem]]:
    """The manifest (schema-checked), or the problem with it."""
    entry = entries.get(MANIFEST)
    if entry is None:
        return None, [ArtifactProblem(MANIFEST, "missing", "manifest")]
    if entry.kind != "file":
        return None, [ArtifactProblem(MANIFEST, f"is a {entry.kind}, not a regular file (links are never followed)", "manifest")]
    try:
        manifest = json.loads(read_bytes_no_follow(root, MANIFEST, MAX_DOCUMENT_BYTES))
        validate(manifest, "manifest")
    except (ValueError, SchemaError, OSError, RecursionError) as exc:
        return None, [ArtifactProblem(MANIFEST, f"invalid: {exc}", "manifest")]
    return manifest, []


def validate_artifact(root: Path) -> list[ArtifactProblem]:
    """Every problem found (empty list: the artifact is intact and holds nothing but its listed files)."""
    try:
        entries = {e.rel: e for e in walk(root)}
    except OSError as exc:
        return [ArtifactProblem(str(root), f"cannot be read ({exc.strerror or exc})", "other")]
    manifest, problems = read_manifest(root, entries)
    if manifest is None:
        return problems
    listed = {entry["path"]: entry for entry in manifest["files"]}
    flying = manifest.get("in_flight") or []  # runs being written when bench stopped: not hashed yet
    if flying and manifest.get("complete"):
        problems.append(ArtifactProblem(MANIFEST, "complete, yet folders are in flight", "other"))
    for rel, item in listed.items():
        found = entries.get(rel)
        if found is None:
            problems.append(ArtifactProblem(rel, "listed in the manifest but missing", "missing"))
            continue
        if found.kind == "link":
            problems.append(ArtifactProblem(rel, "is a symbolic link (never followed)", "link"))
            continue
        if found.kind != "file":
            problems.append(ArtifactProblem(rel, f"listed in the manifest but a {found.kind}, not a regular file", "special"))
            continue
        try:
            size, digest = sha256_no_follow(root, rel)
        except OSError as exc:
            problems.append(ArtifactProblem(rel, f"cannot be read without following a link ({exc.strerror or exc})", "link"))
            continue
        if size != item["bytes"] or digest != item["sha256"]:
            problems.append(ArtifactProblem(rel, "sha256 differs from the manifest (modified)", "modified"))
            continue
        problem = _check_document(root, rel)
        if problem:
            problems.append(problem)
    for item in manifest.get("omitted") or []:  # a published copy (artifacts.publish) leaves bench's shared weights out
        if not omittable(item["path"]):
            problems.append(ArtifactProblem(item["path"], "listed as omitted, but only bench's shared initial weights may be", "manifest"))
        elif item["path"] in entries or item["path"] in listed:
            problems.append(ArtifactProblem(item["path"], "listed as omitted, yet present", "manifest"))
    for rel, entry in entries.items():
        if rel == MANIFEST or rel in listed or entry.kind == "dir":
            continue
        if entry.kind == "link":
            problems.append(ArtifactProblem(rel, "symbolic link, not listed in the manifest (never followed)", "link"))
        elif entry.kind == "other":
            problems.append(ArtifactProblem(rel, "not a regular file (FIFO, socket or device), not listed in the manifest", "special"))
        elif not in_flight(rel, flying):  # a regular file of the run bench was writing when it stopped
            problems.append(ArtifactProblem(rel, "not listed in the manifest", "unlisted"))
    for rel, entry in entries.items():  # folders and names outside the layout (empty dot-folders, runs/not-a-run)
        outside = None if in_flight(rel, flying) else layout_problem(rel, entry.kind)
        if outside:
            problems.append(ArtifactProblem(rel, outside, "layout"))
    return problems
