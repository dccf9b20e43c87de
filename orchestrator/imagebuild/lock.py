"""images/images.lock.json: what each engine image was built from and what it contains.

Written by ``bench image build`` and ``bench image bump`` after the image ran once to report
its framework, CUDA and cuDNN versions; committed with the sources so that any archived
result (whose run record names the image id) can be traced to its base and versions.
``$BENCH_IMAGES_LOCK`` (or ``--lock``) points bench at another file, e.g. in tests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from orchestrator.errors import BadInput
from orchestrator.jsonio import write_text_atomic
from orchestrator.paths import images_dir

LOCK_NAME = "images.lock.json"
LOCK_ENV = "BENCH_IMAGES_LOCK"
SCHEMA_VERSION = 1

_NULLABLE_STR = {"type": ["string", "null"]}
ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["engine", "image", "image_id", "base", "framework_version", "cuda", "cudnn", "built_at", "source_revision"],
    "properties": {
        "engine": {"type": "string"},
        "image": {"type": "string"},
        "image_id": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "base": {
            "type": "object",
            "required": ["ref", "digest", "image_id", "pinned"],
            "properties": {"ref": {"type": "string"}, "digest": _NULLABLE_STR, "image_id": _NULLABLE_STR, "pinned": {"type": "boolean"}},
        },
        "framework": _NULLABLE_STR,
        "framework_version": _NULLABLE_STR,
        "cuda": _NULLABLE_STR,
        "cudnn": _NULLABLE_STR,
        "python": _NULLABLE_STR,
        "os": _NULLABLE_STR,
        "engine_version": _NULLABLE_STR,
        "built_at": {"type": "string"},
        "source_revision": {"type": "string"},
        "dockerfile_sha256": {"type": "string"},
        "docker_server": _NULLABLE_STR,
        "image_user": _NULLABLE_STR,
    },
}
LOCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema_version", "images"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "note": {"type": "string"},
        "images": {"type": "object", "additionalProperties": ENTRY_SCHEMA},
    },
}
EMPTY_NOTE = ("Written by 'bench image build' and 'bench image bump' (image id, base reference and digest, and the "
              "framework/CUDA/cuDNN versions read from inside the built image). Commit it after building.")


def lock_path() -> Path:
    override = os.environ.get(LOCK_ENV)
    return Path(override) if override else images_dir() / LOCK_NAME


def _check(document: Any, path: Path) -> None:
    errors = sorted(Draft202012Validator(LOCK_SCHEMA).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path)
        raise BadInput(f"{path}: {where + ': ' if where else ''}{errors[0].message}")


def read_lock(path: Path | None = None) -> dict[str, Any]:
    """The lock document (an empty one when the file does not exist yet)."""
    path = path or lock_path()
    if not path.is_file():
        return {"schema_version": SCHEMA_VERSION, "note": EMPTY_NOTE, "images": {}}
    try:
        document = json.loads(path.read_text())
    except ValueError:
        raise BadInput(f"{path}: not JSON") from None
    _check(document, path)
    return document


def locked(engine: str, path: Path | None = None) -> dict[str, Any] | None:
    return read_lock(path)["images"].get(engine)


def record(entry: dict[str, Any], path: Path | None = None) -> Path:
    """Replace the entry of ``entry['engine']``; write atomically with sorted engines."""
    path = path or lock_path()
    document = read_lock(path)
    document["images"][entry["engine"]] = entry
    document["images"] = dict(sorted(document["images"].items()))
    _check(document, path)
    write_text_atomic(path, json.dumps(document, indent=2) + "\n")
    return path
