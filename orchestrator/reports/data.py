"""Everything a report shows, read once from an artifact folder (never modified)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.artifacts.layout import MANIFEST, RUNS, SCENARIO, SUMMARY
from orchestrator.artifacts.validate import MAX_DOCUMENT_BYTES, ArtifactProblem, validate_artifact
from orchestrator.artifacts.walk import read_bytes_no_follow, walk
from orchestrator.errors import BadInput
from orchestrator.host.telemetry import CSV_NAME, parse_csv
from orchestrator.schemas import SchemaError, validate


@dataclass
class RunData:
    run_id: str
    record: dict[str, Any]
    result: dict[str, Any] | None
    telemetry: list[dict[str, Any]] | None  # rows of telemetry.csv

    @property
    def gpu(self) -> dict[str, Any]:
        return (self.record.get("telemetry") or {}).get("gpu") or {}

    @property
    def label(self) -> str:
        r = self.record
        return f"{r['engine']} {r['precision']} {r['path']} b{r['batch_per_device']} x{r['devices']} #{r['repeat']}"


@dataclass
class ReportData:
    source: str
    summary: dict[str, Any]
    manifest: dict[str, Any]
    runs: list[RunData]
    problems: list[ArtifactProblem] = field(default_factory=list)
    scenario: dict[str, Any] = field(default_factory=dict)  # the artifact's resolved scenario.yaml
    as_published: ReportData | None = None  # a second artifact: the claims' own protocol on this GPU (report --as-published)

    @property
    def artifact_id(self) -> str:
        return self.summary["artifact_id"]


def _json(root: Path, rel: str, schema: str | None = None) -> dict[str, Any] | None:
    """A JSON document of the artifact, read without following links (None when absent or invalid)."""
    try:
        document = json.loads(read_bytes_no_follow(root, rel, MAX_DOCUMENT_BYTES))
        if schema:
            validate(document, schema)
        return document
    except (OSError, ValueError, SchemaError, RecursionError):
        return None


def _telemetry(root: Path, rel: str, source: str) -> list[dict[str, Any]] | None:
    try:
        text = read_bytes_no_follow(root, rel, MAX_DOCUMENT_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise BadInput(f"{source}: {rel}: refused ({exc.strerror or exc}; links are never followed)") from None
    try:
        return parse_csv(io.StringIO(text, newline=""))
    except (csv.Error, ValueError) as exc:
        raise BadInput(f"{source}: {rel}: not a telemetry file ({exc})") from None


def load_report_data(root: Path, source: str | None = None) -> ReportData:
    """Summary, manifest, run records, engine results and telemetry samples; BadInput when unusable.

    Never follows a link: a linked run folder or file is refused (the artifact would not validate either).
    """
    label = source or str(root)
    entries = {e.rel: e for e in walk(root)}
    manifest = _json(root, MANIFEST, "manifest")
    if manifest is None:
        raise BadInput(f"{label}: not a bench artifact (no valid {MANIFEST})")
    summary = _json(root, SUMMARY, "summary")
    if summary is None:
        raise BadInput(f"{label}: no valid {SUMMARY} (the run may still be in progress)")
    links = [rel for rel, e in entries.items() if e.kind in ("link", "other")]
    if links:
        raise BadInput(f"{label}: {links[0]}: a link or special file in the artifact; refused (links are never followed)")
    order = {row["run_id"]: i for i, row in enumerate(summary["runs"])}
    runs = []
    folders = [rel.split("/", 1)[1] for rel, e in entries.items() if e.kind == "dir" and rel.startswith(f"{RUNS}/") and rel.count("/") == 1]
    for name in sorted(folders, key=lambda n: (order.get(n, 1 << 30), n)):
        record = _json(root, f"{RUNS}/{name}/run.json", "run-record")
        if record is None:
            continue
        result = _json(root, f"{RUNS}/{name}/result.json", "engine-result")
        csv_rel = f"{RUNS}/{name}/{CSV_NAME}"
        telemetry = _telemetry(root, csv_rel, label) if csv_rel in entries else None
        runs.append(RunData(name, record, result, telemetry))
    return ReportData(label, summary, manifest, runs, validate_artifact(root), _scenario(root, entries))


def _scenario(root: Path, entries: dict) -> dict[str, Any]:
    """The resolved scenario document, or {} when it cannot be read (the report still renders)."""
    import yaml

    if SCENARIO not in entries:
        return {}
    try:
        document = yaml.safe_load(read_bytes_no_follow(root, SCENARIO, MAX_DOCUMENT_BYTES))
    except (OSError, yaml.YAMLError):
        return {}
    return document if isinstance(document, dict) else {}
