"""What this bench process wrote itself: path -> sha256 of the bytes it last wrote there.

The manifest (:mod:`orchestrator.artifacts.seal`) accepts a change to a sealed file only when bench
wrote the new bytes (a run record rewritten by the cross-engine check, the summary); any other
change is tampering. No imports: every writer may note what it wrote.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_WRITTEN: dict[str, str] = {}


def note_written(path: Path, data: bytes) -> None:
    """Record that bench wrote ``data`` to ``path``."""
    _WRITTEN[os.path.abspath(path)] = hashlib.sha256(data).hexdigest()


def wrote(path: Path, sha256: str) -> bool:
    """Did bench itself last write these bytes (their sha256) to ``path``?"""
    return _WRITTEN.get(os.path.abspath(path)) == sha256
