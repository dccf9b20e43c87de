"""The manifest hashes a file once per content (hard links and unchanged files are not re-read), and a
changed file is hashed again."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.artifacts import manifest


def test_unchanged_and_linked_files_are_read_once_and_changes_are_seen(tmp_path: Path, monkeypatch) -> None:
    reads: list[Path] = []
    real = manifest.file_sha256
    monkeypatch.setattr(manifest, "_KNOWN", {})
    monkeypatch.setattr(manifest, "file_sha256", lambda p: reads.append(p) or real(p))
    weights = tmp_path / "init.safetensors"
    weights.write_bytes(b"w" * 4096)
    link = tmp_path / "run" / "init.safetensors"
    link.parent.mkdir()
    os.link(weights, link)
    first = {manifest._manifest_sha256(p) for p in (weights, link, weights)}
    assert len(first) == 1 and reads == [weights]
    fresh = tmp_path / ".tmp"
    fresh.write_bytes(b"x" * 4096)  # same size, new content, replaced atomically as bench writes files
    os.replace(fresh, weights)
    assert manifest._manifest_sha256(weights) == real(weights) != next(iter(first))
    assert manifest._manifest_sha256(link) == next(iter(first))  # the link still holds the old bytes
    # the old inode lost a link, so its change time moved and it is read again: the change time is part
    # of the key, so that a rewrite cannot hide behind an mtime set back (os.utime)
    assert len(reads) == 3
    assert manifest._manifest_sha256(link) == next(iter(first)) and len(reads) == 3  # unchanged since: not re-read
    stat = link.stat()
    link.write_bytes(b"y" * 4096)
    os.utime(link, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert manifest._manifest_sha256(link) == real(link) != next(iter(first))
