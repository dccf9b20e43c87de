"""Image references: ``[registry/]repository[:tag][@sha256:<64 hex>]``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.errors import BadInput

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_REF_RE = re.compile(
    r"^(?P<repository>[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z0-9]+:[A-Fa-f0-9]+))?$"
)


@dataclass(frozen=True)
class ImageRef:
    repository: str
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        """Pinned = carries a well-formed sha256 digest (a tag alone can move)."""
        return bool(self.digest and DIGEST_RE.match(self.digest))

    def __str__(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def with_digest(self, digest: str) -> ImageRef:
        return ImageRef(self.repository, self.tag, digest)


def parse_ref(ref: str, where: str = "--base") -> ImageRef:
    """Parse an image reference; BadInput naming ``where`` when it is malformed."""
    text = (ref or "").strip()
    match = _REF_RE.match(text)
    if not match:
        raise BadInput(f"{where}: '{ref}' is not an image reference ([registry/]name[:tag][@sha256:<64 hex>])")
    digest = match.group("digest")
    if digest and not DIGEST_RE.match(digest):
        raise BadInput(f"{where}: '{ref}' has a malformed digest (expected sha256:<64 lowercase hex>)")
    return ImageRef(match.group("repository"), match.group("tag"), digest)


def require_pinned(ref: str, where: str = "--base") -> ImageRef:
    """--require-pinned: refuse a base that is not pinned by a sha256 digest."""
    parsed = parse_ref(ref, where)
    if not parsed.pinned:
        raise BadInput(f"{where}: '{ref}' is not pinned by digest (--require-pinned wants name:tag@sha256:<digest>)")
    return parsed
