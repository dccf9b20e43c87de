"""The folder layout of an artifact.

``<root>/<scenario>/<UTC time>-<id>/``: ``scenario.yaml`` (resolved), ``runs/<run-id>/``
(``spec.json``, ``result.json``, ``run.json``, ``engine.log``, telemetry), ``summary.json``,
``label.json`` (with ``--label``), ``manifest.json``; ``attempts/<run-id>/<N>/`` keeps earlier attempts replaced by ``bench scenario resume``.
"""

from __future__ import annotations

import fnmatch
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.errors import BadInput

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
SCENARIO = "scenario.yaml"
RUNS = "runs"
INTEGRITY = "integrity.json"  # overrides of integrity checks (resume --force), see artifacts.integrity
LABEL = "label.json"  # the artifact's label (scenario run --label), see artifacts.label
RUN_ID = re.compile(r"^(?P<engine>.+)-(?P<precision>[^-]+)-(?P<path>[^-]+)-b(?P<batch>\d+)-d(?P<devices>\d+)-r(?P<repeat>\d+)$")

# what an artifact may hold at its top level (attempts: resume's earlier attempts; maxbatch: the
# maximal batch searches; init: the shared initial weights): anything else is outside the layout
TOP_FILES = frozenset({SCENARIO, SUMMARY, MANIFEST, INTEGRITY, LABEL})
TOP_FOLDERS = frozenset({RUNS, "attempts", "maxbatch", "init"})

# the only files a published copy may leave out (artifacts.publish): bench's shared initial weights, re-made from the seed
OMITTABLE = ("init/*.safetensors", "runs/*/init.safetensors", "attempts/*/*/init.safetensors")


def omittable(rel: str) -> bool:
    """Is ``rel`` one of the files a published copy may leave out?"""
    return any(fnmatch.fnmatchcase(rel, pattern) and rel.count("/") == pattern.count("/") for pattern in OMITTABLE)


# where reports and archives go by default: <results>/reports/<scenario>/, <results>/archives/<scenario>/,
# beside the scenario folders, never inside one (where a report folder could pass for the newest artifact)
REPORTS = "reports"
ARCHIVES = "archives"


def results_root(source: Path, scenario: str) -> Path:
    """The results folder ``source`` belongs to: ``<root>`` of an artifact folder ``<root>/<scenario>/<id>``
    (bench's layout) or of an archive ``<root>/archives/<scenario>/<file>``; else the folder holding ``source``."""
    source = source.resolve()
    if source.parent.name != scenario:
        return source.parent
    root = source.parent.parent
    return root.parent if source.is_file() and root.name == ARCHIVES else root


# file name -> schema it must satisfy
SCHEMA_OF = {
    "search.json": "maxbatch", "probes.json": "maxbatch-probes", "spec.json": "run-spec", "result.json": "engine-result", "run.json": "run-record",
    SUMMARY: "summary", MANIFEST: "manifest", INTEGRITY: "integrity", LABEL: "label", "slurm-job.json": "slurm-job",
}


@dataclass(frozen=True)
class Artifact:
    root: Path
    scenario: str
    artifact_id: str

    def run_dir(self, run_id: str) -> Path:
        return self.root / RUNS / run_id

    def run_dirs(self) -> list[Path]:
        runs = self.root / RUNS
        return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []


def layout_problem(rel: str, kind: str) -> str | None:
    """Why the entry ``rel`` (of ``kind`` file | dir | ...) is outside an artifact's layout, or None."""
    parts = rel.split("/")
    if any(part.startswith(".") for part in parts):
        return "dot-named entry, outside the artifact's layout"
    if len(parts) == 1 and not ((parts[0] in TOP_FILES and kind != "dir") or (parts[0] in TOP_FOLDERS and kind == "dir")):
        return f"unknown top-level {'folder' if kind == 'dir' else 'entry'}, outside the artifact's layout"
    if len(parts) == 2 and parts[0] == RUNS and (kind != "dir" or not RUN_ID.match(parts[1])):
        return "not a run folder (runs/ holds one folder per run id), outside the artifact's layout"
    if len(parts) == 3 and parts[0] == "attempts" and not parts[2].isdigit():
        return "not an attempt folder (attempts/<run id>/<N>/), outside the artifact's layout"
    return None


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def create_artifact(out_root: Path, scenario: str) -> Artifact:
    artifact_id = f"{utc_stamp()}-{secrets.token_hex(3)}"
    root = out_root / scenario / artifact_id
    try:
        (root / RUNS).mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise BadInput(f"--out {out_root}: cannot create the artifact folder ({exc.strerror or exc})") from None
    return Artifact(root, scenario, artifact_id)


def open_artifact(folder: Path) -> Artifact:
    """An existing artifact folder (BadInput when it is not one)."""
    import json

    from orchestrator.artifacts.walk import read_bytes_no_follow

    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise BadInput(f"{folder}: not a bench artifact (no {MANIFEST})")
    try:
        meta = json.loads(read_bytes_no_follow(folder, MANIFEST, 256 << 20))
    except OSError as exc:
        raise BadInput(f"{manifest}: refused ({exc.strerror or exc}; links are never followed)") from None
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{manifest}: unreadable ({exc})") from None
    if not isinstance(meta, dict):
        raise BadInput(f"{manifest}: not a manifest (a JSON object)")
    return Artifact(folder, meta.get("scenario", "?"), meta.get("artifact_id", folder.name))
