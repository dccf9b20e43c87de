"""Atomic, schema-checked JSON files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench_engine.result import write_text_atomic
from orchestrator.schemas import validate
from orchestrator.written import note_written

__all__ = ["read_json", "write_json", "write_text_atomic"]


def write_json(path: Path, document: Any, schema: str | None = None) -> None:
    """Validate against ``schema`` (when given) before writing atomically; strict JSON (ValueError on a
    NaN or infinite number: bench never writes the non-JSON tokens ``NaN``/``Infinity``)."""
    if schema:
        validate(document, schema)
    text = json.dumps(document, indent=2, allow_nan=False) + "\n"
    write_text_atomic(path, text)
    note_written(path, text.encode())


def read_json(path: Path, schema: str | None = None) -> Any:
    document = json.loads(Path(path).read_text())
    if schema:
        validate(document, schema)
    return document
