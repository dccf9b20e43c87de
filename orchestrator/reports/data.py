"""Everything a report shows, read once from an artifact folder (never modified)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.artifacts.layout import MANIFEST, RUNS, SUMMARY
from orchestrator.artifacts.validate import ArtifactProblem, validate_artifact
from orchestrator.errors import BadInput
from orchestrator.schemas import SchemaError, validate
from orchestrator.telemetry import CSV_NAME, read_csv


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

    @property
    def artifact_id(self) -> str:
        return self.summary["artifact_id"]


def _json(path: Path, schema: str | None = None) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text())
        if schema:
            validate(document, schema)
        return document
    except (OSError, ValueError, SchemaError):
        return None


def load_report_data(root: Path, source: str | None = None) -> ReportData:
    """Summary, manifest, run records, engine results and telemetry samples; BadInput when unusable."""
    manifest = _json(root / MANIFEST, "manifest")
    if manifest is None:
        raise BadInput(f"{source or root}: not a bench artifact (no valid {MANIFEST})")
    summary = _json(root / SUMMARY, "summary")
    if summary is None:
        raise BadInput(f"{source or root}: no valid {SUMMARY} (the run may still be in progress)")
    order = {row["run_id"]: i for i, row in enumerate(summary["runs"])}
    runs = []
    run_root = root / RUNS
    for folder in sorted(run_root.iterdir() if run_root.is_dir() else [], key=lambda p: (order.get(p.name, 1 << 30), p.name)):
        record = _json(folder / "run.json", "run-record")
        if record is None:
            continue
        result = _json(folder / "result.json", "engine-result")
        telemetry = read_csv(folder / CSV_NAME) if (folder / CSV_NAME).is_file() else None
        runs.append(RunData(folder.name, record, result, telemetry))
    return ReportData(source or str(root), summary, manifest, runs, validate_artifact(root))
