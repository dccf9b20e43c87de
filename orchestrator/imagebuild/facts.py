"""Facts of a built engine image read from the daemon: its labels, the run record's image block, digests.

The labels are written by ``bench image build`` (and the engine's Dockerfile); the docker
runtime records them for each run (:func:`image_facts`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from orchestrator.imagebuild.refs import parse_ref

LABEL_BASE_NAME = "org.opencontainers.image.base.name"
LABEL_BASE_DIGEST = "org.opencontainers.image.base.digest"
LABEL_BASE_ID = "io.bench.base.image-id"
LABEL_ENGINE = "io.bench.engine"
LABEL_VERSION = "org.opencontainers.image.version"
LABEL_REVISION = "org.opencontainers.image.revision"


@dataclass(frozen=True)
class ImageFacts:
    """Run-record facts of a local engine image: its id, base and the base's digest, engine version, source revision."""

    image_id: str
    base: str | None = None
    base_digest: str | None = None
    base_digest_kind: str | None = None  # registry manifest | local image id (...)
    engine_version: str | None = None
    source_revision: str | None = None

    def __post_init__(self) -> None:
        if not self.image_id:
            raise ValueError("image facts name the image's id")
        if (self.base_digest is None) != (self.base_digest_kind is None):
            raise ValueError("a base digest says what kind of digest it is")

    def to_json(self) -> dict[str, str]:
        """The facts known, as the run record's runtime block has them."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def image_facts(image: Any) -> ImageFacts:
    """The facts of a local engine image (a docker-py Image), read from its labels."""
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    digest, kind = None, None
    if labels.get(LABEL_BASE_DIGEST):
        digest, kind = labels[LABEL_BASE_DIGEST], "registry manifest"
    elif labels.get(LABEL_BASE_ID):
        digest, kind = labels[LABEL_BASE_ID], "local image id (the base has no registry digest)"
    return ImageFacts(image.id, labels.get(LABEL_BASE_NAME) or None, digest, kind,
                      labels.get(LABEL_VERSION) or None, labels.get(LABEL_REVISION) or None)


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
