"""manifest.json: every file of the artifact with its size and sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orchestrator
from orchestrator.artifacts.layout import MANIFEST, Artifact
from orchestrator.artifacts.seal import seal_listing
from orchestrator.artifacts.walk import walk
from orchestrator.clock import utc_now
from orchestrator.jsonio import write_json


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# (device, inode, size, mtime_ns, ctime_ns) -> sha256 of the files this process already hashed for a manifest.
# The manifest is rewritten before and after every run; without this, every rewrite re-hashed every
# file (the shared 94 MB initial-weights file and its hard link in each run folder included), a cost
# that grew with the square of the runs. `bench results validate` never uses it: it always re-reads.
# The change time is part of the key: an engine can set a file's mtime back (os.utime), not its ctime.
_KNOWN: dict[tuple[int, int, int, int, int], str] = {}


def _manifest_sha256(path: Path) -> str:
    info = path.stat()
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    if key not in _KNOWN:
        _KNOWN[key] = file_sha256(path)
    return _KNOWN[key]


def listed_files(root: Path) -> list[Path]:
    """Every regular file under ``root`` but the manifest itself, dot-files included, sorted; links are
    neither listed nor entered (``bench results validate`` reports them)."""
    return [root / e.rel for e in walk(root) if e.kind == "file" and e.rel != MANIFEST]


def in_flight(rel: str, folders: list[str]) -> bool:
    """Is the artifact path ``rel`` inside one of the folders the manifest declares in flight?"""
    return any(rel == folder or rel.startswith(folder.rstrip("/") + "/") for folder in folders)


def write_manifest(artifact: Artifact, complete: bool, in_flight_folders: list[str] | None = None) -> dict:
    """Hash every file and check it against its seal (:mod:`orchestrator.artifacts.seal`).
    ``in_flight_folders`` (relative paths) are being written now (the run in flight, folders resume
    is moving): their files are neither listed nor required, so that an
    artifact whose bench was killed (SIGKILL, power loss) still validates; the next manifest
    written without them lists what they hold then."""
    flying = list(in_flight_folders or [])
    current = [
        (rel, p.stat().st_size, _manifest_sha256(p))
        for p in listed_files(artifact.root)
        if not in_flight(rel := p.relative_to(artifact.root).as_posix(), flying)
    ]
    files = seal_listing(artifact.root, current, flying)  # sealed files are never re-hashed into the manifest
    manifest = {
        "schema_version": 1,
        "scenario": artifact.scenario,
        "artifact_id": artifact.artifact_id,
        "created_at": utc_now(),
        "bench_version": orchestrator.__version__,
        "complete": complete,
        "files": [entry.to_json() for entry in files],
    }
    if flying:
        manifest["in_flight"] = flying
    write_json(artifact.root / MANIFEST, manifest, "manifest")
    return manifest
