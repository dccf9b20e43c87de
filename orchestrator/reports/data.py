"""Everything a report shows, read once from an artifact folder (never modified)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_engine.contract import EngineResult
from orchestrator.artifacts.layout import MANIFEST, RUNS, SCENARIO, SUMMARY
from orchestrator.artifacts.validate import MAX_DOCUMENT_BYTES, ArtifactProblem, validate_artifact
from orchestrator.artifacts.walk import read_bytes_no_follow, walk
from orchestrator.errors import BadInput
from orchestrator.host.telemetry import CSV_NAME, parse_csv
from orchestrator.judge.record import RunRecord
from orchestrator.judge.summary_model import Summary
from orchestrator.scenario.blocks import Claims
from orchestrator.schemas import SchemaError, validate


@dataclass(frozen=True)
class RunData:
    run_id: str
    record: RunRecord
    result: EngineResult | None
    telemetry: list[dict[str, Any]] | None  # rows of telemetry.csv (host/telemetry.parse_csv)

    @property
    def gpu(self) -> Mapping[str, Any]:
        return (self.record.telemetry or {}).get("gpu") or {}

    @property
    def label(self) -> str:
        return self.record.label


@dataclass
class ReportData:
    source: str
    summary: Summary
    manifest: Mapping[str, Any]  # the manifest document (artifacts/manifest.py)
    runs: list[RunData]
    problems: list[ArtifactProblem] = field(default_factory=list)
    claims: Claims | None = None  # the claims of the artifact's resolved scenario.yaml
    as_published: ReportData | None = None  # a second artifact: the claims' own protocol on this GPU (report --as-published)

    @property
    def artifact_id(self) -> str:
        return self.summary.artifact_id


def _json(root: Path, rel: str, schema: str | None = None) -> dict[str, Any] | None:  # the file boundary
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
    typed = Summary.from_json(summary)
    runs = []
    folders = [rel.split("/", 1)[1] for rel, e in entries.items() if e.kind == "dir" and rel.startswith(f"{RUNS}/") and rel.count("/") == 1]
    for name in sorted(folders, key=lambda n: (order.get(n, 1 << 30), n)):
        record = _json(root, f"{RUNS}/{name}/run.json", "run-record")
        if record is None:
            continue
        result = _json(root, f"{RUNS}/{name}/result.json", "engine-result")
        csv_rel = f"{RUNS}/{name}/{CSV_NAME}"
        telemetry = _telemetry(root, csv_rel, label) if csv_rel in entries else None
        runs.append(RunData(name, RunRecord.from_json(record), EngineResult.from_json(result) if result else None, telemetry))
    return ReportData(label, typed, manifest, runs, validate_artifact(root), artifact_claims(root) if SCENARIO in entries else None)


def artifact_claims(root: Path) -> Claims | None:
    """The ``claims`` of the artifact's resolved scenario.yaml; None without any, or when they cannot be read (the report
    still renders)."""
    import yaml

    try:
        document = yaml.safe_load(read_bytes_no_follow(root, SCENARIO, MAX_DOCUMENT_BYTES))  # the file boundary
        block = document.get("claims") if isinstance(document, dict) else None
        return Claims.from_json(block) if isinstance(block, dict) else None
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError):
        return None
