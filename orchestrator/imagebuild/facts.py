"""Facts of a built engine image read from the daemon: its labels, the run record's image block, digests.

The labels are written by ``bench image build`` (and the engine's Dockerfile); the docker
runtime records them for each run (:func:`image_facts`).
"""

from __future__ import annotations

from typing import Any

from orchestrator.imagebuild.refs import parse_ref

LABEL_BASE_NAME = "org.opencontainers.image.base.name"
LABEL_BASE_DIGEST = "org.opencontainers.image.base.digest"
LABEL_BASE_ID = "io.bench.base.image-id"
LABEL_ENGINE = "io.bench.engine"
LABEL_VERSION = "org.opencontainers.image.version"
LABEL_REVISION = "org.opencontainers.image.revision"


def image_facts(image: Any) -> dict[str, Any]:
    """Run-record facts of a local engine image: id, base and its digest, engine version, revision."""
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    facts: dict[str, Any] = {"image_id": image.id}
    if labels.get(LABEL_BASE_NAME):
        facts["base"] = labels[LABEL_BASE_NAME]
    if labels.get(LABEL_BASE_DIGEST):
        facts["base_digest"] = labels[LABEL_BASE_DIGEST]
        facts["base_digest_kind"] = "registry manifest"
    elif labels.get(LABEL_BASE_ID):
        facts["base_digest"] = labels[LABEL_BASE_ID]
        facts["base_digest_kind"] = "local image id (the base has no registry digest)"
    for key, label in (("engine_version", LABEL_VERSION), ("source_revision", LABEL_REVISION)):
        if labels.get(label):
            facts[key] = labels[label]
    return facts


def repo_digest(image: Any, ref: str | None = None) -> str | None:
    """The registry (manifest) digest of a local image, preferring the repository of ``ref``."""
    digests = (image.attrs or {}).get("RepoDigests") or []
    if ref:
        repository = parse_ref(ref).repository
        for entry in digests:
            name, _, digest = entry.partition("@")
            if name == repository:
                return digest
    return digests[0].partition("@")[2] if digests else None
