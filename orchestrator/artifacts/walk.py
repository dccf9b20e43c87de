"""Walk an artifact folder without ever following a link, and open its files the same way."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_ENTRIES = 1_000_000  # an artifact with more entries than this is refused rather than walked


@dataclass(frozen=True)
class Entry:
    rel: str  # path relative to the root, '/'-separated
    kind: str  # "file" | "dir" | "link" | "other"
    size: int


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


def walk(root: Path) -> list[Entry]:
    """Every entry under ``root`` (not ``root`` itself), links reported as links and never entered; sorted."""
    entries: list[Entry] = []
    stack = [""]
    while stack:
        prefix = stack.pop()
        with os.scandir(root / prefix if prefix else root) as listing:
            for item in listing:
                info = item.stat(follow_symlinks=False)
                rel = f"{prefix}/{item.name}" if prefix else item.name
                kind = _kind(info.st_mode)
                entries.append(Entry(rel, kind, info.st_size))
                if len(entries) > MAX_ENTRIES:
                    raise OSError(f"more than {MAX_ENTRIES} entries")
                if kind == "dir":
                    stack.append(rel)
    return sorted(entries, key=lambda e: e.rel)


def open_no_follow(root: Path, rel: str) -> int:
    """A read-only descriptor of ``root/rel``, refusing (OSError) a link at any step below ``root``."""
    # O_NONBLOCK: opening a FIFO planted in place of a file must not hang (no effect on regular files)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise OSError(f"{rel}: not a path inside the artifact")
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags | getattr(os, "O_DIRECTORY", 0), dir_fd=fd)
            os.close(fd)
            fd = nxt
        final = os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(final).st_mode):
        os.close(final)
        raise OSError(f"{rel}: not a regular file")
    return final


def read_bytes_no_follow(root: Path, rel: str, limit: int | None = None) -> bytes:
    """The bytes of ``root/rel`` (at most ``limit``), never through a link."""
    with os.fdopen(open_no_follow(root, rel), "rb") as handle:
        return handle.read() if limit is None else handle.read(limit)
