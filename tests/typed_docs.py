"""Tests write run records and engine results as (partial) JSON documents; these read them as the typed objects the
judge consumes, filling in the fields a test leaves out (JSON at the boundary, typed objects past it)."""

from __future__ import annotations

from typing import Any

from bench_engine.contract import EngineResult
from orchestrator.judge.record import RunRecord
from orchestrator.judge.summary import summarize


def record_of(doc: dict[str, Any]) -> RunRecord:
    ok = doc.get("status", "ok") == "ok"
    full = {"schema_version": 1, "path": "optimized", "batch_per_device": 32, "devices": 1, "repeat": 1, "status": "ok",
            "runtime": {"name": "local"}, "started_at": "t", "finished_at": "t", "wall_s": 0.0,
            "parity": {"checked": ok, "ok": ok, "mismatches": []}, **doc}
    return RunRecord.from_json(full)


def result_of(doc: dict[str, Any] | None, run_id: str = "r") -> EngineResult | None:
    if doc is None:
        return None
    measurements = {"setup_s": 0.0, "warmup_s": 0.0, "warmup_steps": 0, "steady": {}, **(doc.get("measurements") or {})}
    full = {"schema_version": 1, "run_id": run_id, "engine": "e", "status": "ok", "environment": {}, **doc, "measurements": measurements}
    return EngineResult.from_json(full)


def summarize_docs(scenario: str, artifact_id: str, smoke: bool, runs: list[tuple[dict[str, Any], dict[str, Any] | None]],
                   host: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """summary.json of (record, result) documents."""
    typed = [(record_of(record), result_of(result, record["run_id"])) for record, result in runs]
    return summarize(scenario, artifact_id, smoke, typed, host, **kwargs).to_json()
