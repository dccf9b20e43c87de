"""manifest.json: every file of the artifact with its size and sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orchestrator
from orchestrator.artifacts.layout import MANIFEST, Artifact, utc_now
from orchestrator.jsonio import write_json


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def listed_files(root: Path) -> list[Path]:
    """Every regular file under ``root`` but the manifest and hidden temporaries, sorted."""
    return sorted(
        p for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != MANIFEST and not p.name.startswith(".")
    )


def write_manifest(artifact: Artifact, complete: bool) -> dict:
    files = [
        {"path": p.relative_to(artifact.root).as_posix(), "sha256": file_sha256(p), "bytes": p.stat().st_size}
        for p in listed_files(artifact.root)
    ]
    manifest = {
        "schema_version": 1,
        "scenario": artifact.scenario,
        "artifact_id": artifact.artifact_id,
        "created_at": utc_now(),
        "bench_version": orchestrator.__version__,
        "complete": complete,
        "files": files,
    }
    write_json(artifact.root / MANIFEST, manifest, "manifest")
    return manifest
