"""A publishable copy of an artifact: every file but bench's shared initial weights, still validating.

The shared weights (``init/*.safetensors``, their hard links ``runs/*/init.safetensors`` and, in a
resumed artifact, ``attempts/*/*/init.safetensors``; 94 MB each for ResNet-50) are bench's own
output, re-made bit for bit from the arch, classes, channels and seed (every spec records their
canonical hash, and every engine's read-back hash must equal it). A published copy leaves them out
and says so: its manifest lists them under ``omitted`` with their size and sha256, and ``bench
results validate`` accepts an omitted file only if its path is one of these weights and it is
absent. Everything else is copied and hashed again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from orchestrator.artifacts.layout import MANIFEST, omittable
from orchestrator.artifacts.validate import read_manifest, validate_artifact
from orchestrator.artifacts.walk import walk
from orchestrator.errors import BadInput
from orchestrator.jsonio import write_json


def publish(source: Path, out_root: Path) -> Path:
    """Copy the valid artifact ``source`` into ``out_root/<artifact id>`` without its shared weights; returns the copy."""
    problems = validate_artifact(source)
    if problems:
        raise BadInput(f"{source}: invalid artifact: {problems[0]} (see 'bench results validate')")
    entries = {e.rel: e for e in walk(source)}
    manifest, _ = read_manifest(source, entries)
    assert manifest is not None  # validated above
    target = out_root / manifest["artifact_id"]
    if target.exists():
        raise BadInput(f"--out {out_root}: {target.name} exists already")
    kept, omitted = [], []
    for item in manifest["files"]:
        (omitted if omittable(item["path"]) else kept).append(item)
    try:
        for item in kept:
            destination = target / item["path"]
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / item["path"], destination)  # regular files only: validate refused links
    except OSError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise BadInput(f"--out {out_root}: cannot write the copy ({exc.strerror or exc})") from None
    copy = {**manifest, "files": kept}
    if omitted or manifest.get("omitted"):
        copy["omitted"] = [*(manifest.get("omitted") or []), *omitted]
    write_json(target / MANIFEST, copy, "manifest")
    problems = validate_artifact(target)
    if problems:  # the source changed under the copy
        shutil.rmtree(target, ignore_errors=True)
        raise BadInput(f"{source}: the copy does not validate ({problems[0]}); was the artifact being written?")
    return target
