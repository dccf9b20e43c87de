"""Bounded, two-pass extraction of an artifact archive (.tar, .tar.gz, .tar.bz2, .tar.xz).

Pass 1 streams through the archive without writing anything: every member is vetted (no absolute
path, ``..``, drive letter, link, device, FIFO, sparse file or duplicate), ``manifest.json`` is read
(at most MAX_MANIFEST bytes) and every other file must be listed in it with the size it declares.
The declared total must fit under MAX_BYTES and in the free space of the temporary folder. Pass 2
streams again and writes only what pass 1 accepted, each file stopped at its declared size. Both
passes count the decompressed bytes and stop past the archive's bound, so a gzip bomb costs
bounded time and memory and a sparse or oversized member costs no disk at all.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from orchestrator.artifacts.layout import MANIFEST
from orchestrator.artifacts.validate import ArtifactProblem
from orchestrator.schemas import SchemaError, validate
from orchestrator.tarsafety import member_problem

MAX_MEMBERS = 200_000
MAX_BYTES = int(os.environ.get("BENCH_ARCHIVE_MAX_BYTES") or 1 << 30)  # content of one archive, 1 GiB unless told
MAX_MANIFEST = 64 << 20
HEADER_ALLOWANCE = 4 << 10  # decompressed bytes allowed per member beyond its data (headers, long names, padding)
DISK_MARGIN = 64 << 20  # free space left in the temporary folder after extraction
STREAM_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


class Overflow(Exception):
    """The decompressed stream went past its bound."""


class _Limited:
    """A read-only stream that raises Overflow once more than ``limit`` bytes were read from it."""

    def __init__(self, raw: IO[bytes], limit: int):
        self.raw, self.limit, self.count = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        want = self.limit + 1 - self.count if size is None or size < 0 else min(size, self.limit + 1 - self.count)
        data = self.raw.read(max(want, 0))
        self.count += len(data)
        if self.count > self.limit:
            raise Overflow(f"expands beyond {self.limit} bytes")
        return data

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> _Limited:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decompressed(path: Path) -> IO[bytes]:
    with open(path, "rb") as probe:
        magic = probe.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def _stream(path: Path, limit: int) -> tuple[_Limited, tarfile.TarFile]:
    limited = _Limited(_decompressed(path), limit)
    try:
        return limited, tarfile.open(fileobj=limited, mode="r|")  # type: ignore[arg-type]
    except BaseException:
        limited.close()
        raise


@dataclass
class Vetted:
    """What pass 1 accepted: the top folder ('' if none), files with their sizes, the folders."""

    top: str = ""
    files: dict[str, int] = field(default_factory=dict)  # archive name -> size
    dirs: set[str] = field(default_factory=set)
    manifest: dict[str, Any] | None = None
    decompressed: int = 0


def _key(name: str) -> str:
    return PurePosixPath(name).as_posix().rstrip("/")


def _manifest_name(name: str) -> str | None:
    """The top folder when ``name`` is a manifest at the top or in a single top folder ('' for the top)."""
    parts = _key(name).split("/")
    if parts[-1] != MANIFEST or len(parts) > 2:
        return None
    return parts[0] if len(parts) == 2 else ""


def _scan(path: Path) -> tuple[Vetted, list[ArtifactProblem]]:
    """Pass 1: vet every member and read the manifest; writes nothing."""
    vetted, problems, seen = Vetted(), [], set()
    limited, tar = _stream(path, MAX_BYTES + MAX_MANIFEST + HEADER_ALLOWANCE * 16)
    with limited, tar:
        for count, member in enumerate(tar, 1):
            if count > MAX_MEMBERS:
                return vetted, [ArtifactProblem("archive", f"too many members (more than {MAX_MEMBERS})")]
            limited.limit = MAX_BYTES + MAX_MANIFEST + HEADER_ALLOWANCE * (count + 16)  # data, manifest, headers so far
            why = member_problem(member)
            if why:
                problems.append(ArtifactProblem(member.name or "?", f"unsafe archive member: {why}"))
                continue
            key = _key(member.name)
            if key in seen and not member.isdir():
                problems.append(ArtifactProblem(member.name, "unsafe archive member: duplicate name"))
            seen.add(key)
            if member.isdir():
                vetted.dirs.add(key)
                continue
            vetted.files[member.name] = member.size
            top = _manifest_name(member.name)
            if top is not None and vetted.manifest is None:
                if member.size > MAX_MANIFEST:
                    problems.append(ArtifactProblem(member.name, f"a manifest of {member.size} bytes (limit {MAX_MANIFEST})"))
                    continue
                handle = tar.extractfile(member)
                vetted.top = top
                vetted.manifest = {"raw": handle.read() if handle else b""}
        vetted.decompressed = limited.count
    return vetted, problems


def _check_against_manifest(vetted: Vetted, free: int) -> list[ArtifactProblem]:
    """Every file listed with its declared size; the declared total within the bounds."""
    raw = (vetted.manifest or {}).get("raw", b"")
    try:
        manifest = json.loads(raw)
        validate(manifest, "manifest")
    except (ValueError, SchemaError, RecursionError) as exc:
        return [ArtifactProblem(MANIFEST, f"invalid: {exc}")]
    vetted.manifest = manifest
    declared = {entry["path"]: entry["bytes"] for entry in manifest["files"]}
    prefix = f"{vetted.top}/" if vetted.top else ""
    problems = []
    for name, size in vetted.files.items():
        rel = _key(name)
        if rel == _key(prefix + MANIFEST):
            continue
        if not rel.startswith(prefix):
            problems.append(ArtifactProblem(name, "outside the artifact's top folder; not extracted"))
            continue
        rel = rel[len(prefix):]
        if rel not in declared:
            problems.append(ArtifactProblem(rel, "not listed in the manifest; not extracted"))
        elif declared[rel] != size:
            problems.append(ArtifactProblem(rel, f"sha256 differs from the manifest (modified: {size} bytes in the archive, "
                                                 f"{declared[rel]} in the manifest); not extracted"))
    total = sum(vetted.files.values())
    if total > MAX_BYTES:
        problems.append(ArtifactProblem("archive", f"expands to {total} bytes (limit {MAX_BYTES}, $BENCH_ARCHIVE_MAX_BYTES)"))
    elif total + DISK_MARGIN > free:
        problems.append(ArtifactProblem("archive", f"expands to {total} bytes, more than the {free} free in the temporary folder"))
    return problems


def _write(path: Path, vetted: Vetted, dest: Path) -> None:
    """Pass 2: extract exactly the vetted members into ``dest`` (raises on any difference from pass 1)."""
    base = dest.resolve()
    limited, tar = _stream(path, vetted.decompressed + HEADER_ALLOWANCE)
    with limited, tar:
        for member in tar:
            target = (base / PurePosixPath(member.name)).resolve()
            if member_problem(member) or not target.is_relative_to(base):
                raise ValueError(f"archive member {member.name!r} changed between reads")
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True, mode=0o755)
                continue
            if vetted.files.get(member.name) != member.size:
                raise ValueError(f"archive member {member.name!r} changed between reads")
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            source = tar.extractfile(member)
            if source is None:
                raise ValueError(f"archive member {member.name!r} has no data")
            with source, open(target, "xb") as sink:
                copied = 0
                while chunk := source.read(min(1 << 20, member.size - copied)):
                    sink.write(chunk)
                    copied += len(chunk)
                if copied != member.size:
                    raise ValueError(f"archive member {member.name!r} is truncated")
            os.chmod(target, 0o644)


def extract_bounded(path: Path, dest: Path) -> list[ArtifactProblem]:
    """Extract the artifact archive at ``path`` into the empty folder ``dest``; problems (nothing or only
    vetted files written) when it is refused."""
    try:
        vetted, problems = _scan(path)
    except Overflow as exc:
        return [ArtifactProblem(path.name, f"refused: the archive {exc} (sparse or compressed bomb?)")]
    except STREAM_ERRORS as exc:
        return [ArtifactProblem(path.name, f"truncated, corrupt or not a tar archive ({exc.__class__.__name__}: {exc})")]
    if problems:
        return problems
    if vetted.manifest is None:
        return [ArtifactProblem(path.name, f"no {MANIFEST} at the top of the archive or in its single top folder")]
    problems = _check_against_manifest(vetted, shutil.disk_usage(dest).free)
    if problems:
        return problems
    try:
        _write(path, vetted, dest)
    except Overflow as exc:
        return [ArtifactProblem(path.name, f"refused: the archive {exc}")]
    except (*STREAM_ERRORS, FileExistsError) as exc:
        return [ArtifactProblem(path.name, f"cannot extract ({exc.__class__.__name__}: {exc})")]
    return []
