"""images/images.lock.json: what each engine image was built from and what it contains.

Written by ``bench image build`` and ``bench image bump`` after the image ran once to report
its framework, CUDA and cuDNN versions; committed with the sources so that any archived
result (whose run record names the image id) can be traced to its base and versions.
``$BENCH_IMAGES_LOCK`` (or ``--lock``) points bench at another file, e.g. in tests.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
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


@dataclass(frozen=True)
class LockBase:
    """The base an image was built from: its reference, registry digest, local image id, pinned by digest or not."""

    ref: str
    digest: str | None
    image_id: str | None
    pinned: bool

    def to_json(self) -> dict[str, str | bool | None]:
        return {"ref": self.ref, "digest": self.digest, "image_id": self.image_id, "pinned": self.pinned}


@dataclass(frozen=True)
class LockEntry:
    """One engine's entry of the lock file (its keys in the order ``bench image build`` writes them)."""

    engine: str
    image: str
    image_id: str
    base: LockBase
    framework: str | None
    framework_version: str | None
    cuda: str | None
    cudnn: str | None
    python: str | None
    os: str | None
    engine_version: str | None
    built_at: str
    source_revision: str
    dockerfile_sha256: str | None = None
    docker_server: str | None = None
    image_user: str | None = None

    @classmethod
    def from_json(cls, doc: Any) -> LockEntry:
        """An entry of a lock document that passed LOCK_SCHEMA (keys the schema leaves optional read as None)."""
        base = doc["base"]
        optional = {key: doc.get(key) for key in ("framework", "python", "os", "engine_version", "dockerfile_sha256", "docker_server", "image_user")}
        return cls(doc["engine"], doc["image"], doc["image_id"], LockBase(base["ref"], base["digest"], base["image_id"], base["pinned"]),
                   framework_version=doc["framework_version"], cuda=doc["cuda"], cudnn=doc["cudnn"], built_at=doc["built_at"],
                   source_revision=doc["source_revision"], **optional)

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "image": self.image, "image_id": self.image_id, "base": self.base.to_json(),
                "framework": self.framework, "framework_version": self.framework_version, "cuda": self.cuda, "cudnn": self.cudnn,
                "python": self.python, "os": self.os, "engine_version": self.engine_version, "built_at": self.built_at,
                "source_revision": self.source_revision,
                **({"dockerfile_sha256": self.dockerfile_sha256} if self.dockerfile_sha256 is not None else {}),  # not nullable
                "docker_server": self.docker_server, "image_user": self.image_user}


def lock_path() -> Path:
    override = os.environ.get(LOCK_ENV)
    return Path(override) if override else images_dir() / LOCK_NAME


def _check(document: Any, path: Path) -> None:
    errors = sorted(Draft202012Validator(LOCK_SCHEMA).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path)
        raise BadInput(f"{path}: {where + ': ' if where else ''}{errors[0].message}")


def read_lock(path: Path | None = None) -> dict[str, Any]:
    """The lock document as JSON, checked against LOCK_SCHEMA (an empty one when the file does not exist yet);
    :func:`entries` and :func:`locked` read its entries typed."""
    path = path or lock_path()
    if not path.is_file():
        return {"schema_version": SCHEMA_VERSION, "note": EMPTY_NOTE, "images": {}}
    try:
        document = json.loads(path.read_text())
    except ValueError:
        raise BadInput(f"{path}: not JSON") from None
    _check(document, path)
    return document


def entries(path: Path | None = None) -> dict[str, LockEntry]:
    """Every engine's entry of the lock file, by engine."""
    return {engine: LockEntry.from_json(doc) for engine, doc in read_lock(path)["images"].items()}


def locked(engine: str, path: Path | None = None) -> LockEntry | None:
    return entries(path).get(engine)


def record(entry: LockEntry, path: Path | None = None) -> Path:
    """Replace the entry of ``entry.engine`` (the other entries kept as the file has them); write
    atomically with sorted engines."""
    path = path or lock_path()
    document = read_lock(path)
    document["images"][entry.engine] = entry.to_json()
    document["images"] = dict(sorted(document["images"].items()))
    _check(document, path)
    write_text_atomic(path, json.dumps(document, indent=2) + "\n")
    return path
