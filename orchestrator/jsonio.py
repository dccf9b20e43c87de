"""Atomic, schema-checked JSON files."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.schemas import validate


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder, fsync, then rename into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, document: Any, schema: str | None = None) -> None:
    """Validate against ``schema`` (when given) before writing atomically."""
    if schema:
        validate(document, schema)
    write_text_atomic(path, json.dumps(document, indent=2) + "\n")


def read_json(path: Path, schema: str | None = None) -> Any:
    document = json.loads(Path(path).read_text())
    if schema:
        validate(document, schema)
    return document
