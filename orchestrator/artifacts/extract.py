"""Bounded, two-pass extraction of an artifact archive (.tar, .tar.gz, .tar.bz2, .tar.xz).

Pass 1 streams through the archive without writing anything: every member is vetted (``tarsafety``:
tarfile's data filter for the destination, then bench's stricter rules: no absolute path, ``..``, drive
letter, symbolic link, device, FIFO, sparse file or duplicate; a hard link only to a regular file member
before it), ``manifest.json`` is read (at most MAX_MANIFEST bytes), every other
file must be listed in it with the size it declares and every folder must hold a listed file. The
decompressed stream is bounded by what the manifest declares (and, before the manifest is read, by
the free space of the destination): a gzip bomb costs bounded time and memory. The files to write
(hard links counted once) must fit in the destination's free space. Pass 2 streams again and writes
only what pass 1 accepted, each file stopped at its declared size, each hard link restored as a link
to the file this pass wrote. A sparse or oversized member costs no disk at all.
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
from typing import IO

from orchestrator.artifacts.layout import MANIFEST
from orchestrator.artifacts.validate import ArtifactProblem
from orchestrator.schemas import SchemaError, validate
from orchestrator.tarsafety import member_problem

MAX_MEMBERS = 200_000
MAX_MANIFEST = 64 << 20
MAX_PROBLEMS = 20  # pass 1 stops after this many problems (150,000 unlisted folders cost no more than 20)
HEADER_ALLOWANCE = 4 << 10  # decompressed bytes allowed per member beyond its data (headers, long names, padding)
BLOCK = 4096  # disk allocation unit assumed per file and folder when checking free space
DISK_MARGIN = 1 << 20  # free space left in the destination after extraction
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


# what an archive may hold before its manifest (bench writes the manifest first, after the top folder)
PRE_MANIFEST_BYTES = 256 << 20
PRE_MANIFEST_MEMBERS = 10_000


@dataclass
class Vetted:
    """What pass 1 accepted: the top folder ('' if none), files with their sizes, hard links, the folders."""

    top: str = ""
    files: dict[str, int] = field(default_factory=dict)  # archive name (normalised) -> size
    links: dict[str, str] = field(default_factory=dict)  # hard link's name -> the regular file member it links to
    dirs: set[str] = field(default_factory=set)
    manifest_read: bool = False  # the manifest was found and read (what it declares is in ``declared``)
    declared: dict[str, int] | None = None  # artifact path -> bytes, once the manifest is read
    decompressed: int = 0

    @property
    def prefix(self) -> str:
        return f"{self.top}/" if self.top else ""

    def folders(self) -> set[str]:
        """The folders the manifest implies: the top and every parent of a listed file."""
        out = {self.top} if self.top else set()
        for rel in self.declared or {}:
            parts = rel.split("/")[:-1]
            out.update(self.prefix + "/".join(parts[:n]) for n in range(1, len(parts) + 1))
        return out


def _key(name: str) -> str:
    return PurePosixPath(name).as_posix().rstrip("/")


def _manifest_name(name: str) -> str | None:
    """The top folder when ``name`` is a manifest at the top or in a single top folder ('' for the top)."""
    parts = _key(name).split("/")
    if parts[-1] != MANIFEST or len(parts) > 2:
        return None
    return parts[0] if len(parts) == 2 else ""


def _read_manifest(raw: bytes, top: str, vetted: Vetted) -> ArtifactProblem | None:
    try:
        manifest = json.loads(raw)
        validate(manifest, "manifest")
    except (ValueError, SchemaError, RecursionError) as exc:
        return ArtifactProblem(MANIFEST, f"invalid: {exc}")
    vetted.top, vetted.manifest_read = top, True
    vetted.declared = {entry["path"]: entry["bytes"] for entry in manifest["files"]}
    return None


def _listing_problem(key: str, size: int | None, vetted: Vetted, folders: set[str]) -> ArtifactProblem | None:
    """A file (``size``) or folder (None) the manifest does not account for."""
    if key == _key(vetted.prefix + MANIFEST):
        return None
    if size is None:
        return None if key in folders or key == "." else ArtifactProblem(key, "a folder holding no listed file; not extracted")
    if not key.startswith(vetted.prefix):
        return ArtifactProblem(key, "outside the artifact's top folder; not extracted")
    rel = key[len(vetted.prefix):]
    declared = (vetted.declared or {}).get(rel)
    if declared is None:
        return ArtifactProblem(rel, "not listed in the manifest; not extracted")
    if declared != size:
        return ArtifactProblem(rel, f"sha256 differs from the manifest (modified: {size} bytes in the archive, "
                                    f"{declared} in the manifest); not extracted")
    return None


def _vet(member: tarfile.TarInfo, tar: tarfile.TarFile, vetted: Vetted, seen: set[str]) -> ArtifactProblem | None:
    """Accept one safe member into ``vetted`` (reading the manifest when it is one); a problem otherwise."""
    key = _key(member.name)
    if key in seen and not member.isdir():
        return ArtifactProblem(member.name, "unsafe archive member: duplicate name")
    seen.add(key)
    if member.isdir():
        vetted.dirs.add(key)
        return None
    if member.islnk():
        target = _key(member.linkname)
        if target not in vetted.files:
            return ArtifactProblem(member.name, f"unsafe archive member: hard link to {member.linkname!r}, "
                                                "not a regular file before it in the archive")
        vetted.links[key] = target
        return None
    vetted.files[key] = member.size
    top = _manifest_name(member.name)
    if top is None or vetted.manifest_read:
        return None
    if member.size > MAX_MANIFEST:
        return ArtifactProblem(member.name, f"a manifest of {member.size} bytes (limit {MAX_MANIFEST})")
    handle = tar.extractfile(member)
    return _read_manifest(handle.read() if handle else b"", top, vetted)


def _scan(path: Path, free: int, dest: Path) -> tuple[Vetted, list[ArtifactProblem]]:
    """Pass 1: vet every member and read the manifest; writes nothing. The stream is bounded by the data
    the manifest declares (before it is read: PRE_MANIFEST_BYTES), never more than ``free``."""
    vetted, problems = Vetted(), []
    limited, tar = _stream(path, MAX_MANIFEST)
    with limited, tar:
        try:
            _vet_all(tar, limited, vetted, problems, free, dest)
        except Overflow as exc:
            problems.append(ArtifactProblem(path.name, f"refused: the archive {exc}: more than its manifest declares or the "
                                                       "destination's free space (sparse or compressed bomb?)"))
        vetted.decompressed = limited.count
    return vetted, problems


def _vet_all(tar: tarfile.TarFile, limited: _Limited, vetted: Vetted, problems: list[ArtifactProblem], free: int,
             dest: Path) -> None:
    """Pass 1's loop: vet each member, tighten the stream's bound once the manifest is read, stop at MAX_PROBLEMS."""
    seen: set[str] = set()
    budget, folders, read = min(free, PRE_MANIFEST_BYTES), set(), MAX_MANIFEST  # read: bytes allowed besides the budget
    limited.limit = budget + read + HEADER_ALLOWANCE * 16
    for count, member in enumerate(tar, 1):
        known = vetted.declared is not None
        if count > MAX_MEMBERS or (count > PRE_MANIFEST_MEMBERS and not known):
            bound = f"{MAX_MEMBERS}" if known else f"{PRE_MANIFEST_MEMBERS} before its {MANIFEST}"
            problems.append(ArtifactProblem("archive", f"too many members (more than {bound})"))
            return
        why = member_problem(member, hard_links=True, dest=dest)
        problem = ArtifactProblem(member.name or "?", f"unsafe archive member: {why}") if why else _vet(member, tar, vetted, seen)
        if not known and vetted.declared is not None:  # the manifest was just read: its sizes bound the rest
            budget, folders, read = min(free, sum(vetted.declared.values())), vetted.folders(), limited.count
        elif known and problem is None:
            key = _key(member.name)
            size = None if member.isdir() else vetted.files.get(vetted.links.get(key, key))
            problem = _listing_problem(key, size, vetted, folders)
        if problem is not None:
            problems.append(problem)
            if len(problems) >= MAX_PROBLEMS:
                return
        limited.limit = budget + read + HEADER_ALLOWANCE * (count + 16)  # data, what came before, headers so far


def _check_against_manifest(vetted: Vetted, free: int, dest: Path) -> list[ArtifactProblem]:
    """Every file and link listed with its declared size, every folder implied; the files fit in ``free``."""
    folders = vetted.folders()
    problems = [p for p in (_listing_problem(key, size, vetted, folders) for key, size in vetted.files.items()) if p]
    problems += [p for p in (_listing_problem(key, vetted.files[target], vetted, folders) for key, target in vetted.links.items()) if p]
    problems += [p for p in (_listing_problem(key, None, vetted, folders) for key in sorted(vetted.dirs)) if p]
    need = sum(-(-size // BLOCK) * BLOCK for size in vetted.files.values()) + BLOCK * len(vetted.dirs) + DISK_MARGIN
    if need > free:
        problems.append(ArtifactProblem("archive", f"needs {need} bytes of disk to extract (hard links counted once), "
                                                   f"more than the {free} free in {dest} (set TMPDIR elsewhere)"))
    return problems


def _write(path: Path, vetted: Vetted, dest: Path) -> None:
    """Pass 2: extract exactly the vetted members into ``dest`` (raises on any difference from pass 1)."""
    base = dest.resolve()
    written: dict[str, Path] = {}
    limited, tar = _stream(path, vetted.decompressed + HEADER_ALLOWANCE)
    with limited, tar:
        for member in tar:
            key = _key(member.name)
            target = (base / PurePosixPath(member.name)).resolve()
            if member_problem(member, hard_links=True, dest=base) or not target.is_relative_to(base):
                raise ValueError(f"archive member {member.name!r} changed between reads")
            if member.isdir():
                if key not in vetted.dirs:
                    raise ValueError(f"archive member {member.name!r} changed between reads")
                target.mkdir(parents=True, exist_ok=True, mode=0o755)
                continue
            if target == base:
                raise ValueError(f"archive member {member.name!r} is the destination itself")
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            if member.islnk():
                source = written.get(_key(member.linkname))
                if source is None or vetted.links.get(key) != _key(member.linkname):
                    raise ValueError(f"archive member {member.name!r} links to a file this extraction did not write")
                os.link(source, target, follow_symlinks=False)
                continue
            if vetted.files.get(key) != member.size:
                raise ValueError(f"archive member {member.name!r} changed between reads")
            _copy(tar, member, target)
            written[key] = target


def _copy(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    """One regular member's data into the new file ``target``, exactly ``member.size`` bytes."""
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
        free = shutil.disk_usage(dest).free
        vetted, problems = _scan(path, free, dest)
    except Overflow as exc:
        return [ArtifactProblem(path.name, f"refused: the archive {exc}: more than its manifest declares or the "
                                           f"destination's free space (sparse or compressed bomb?)")]
    except STREAM_ERRORS as exc:
        return [ArtifactProblem(path.name, f"truncated, corrupt or not a tar archive ({exc.__class__.__name__}: {exc})")]
    if problems:
        return problems
    if not vetted.manifest_read:
        return [ArtifactProblem(path.name, f"no {MANIFEST} at the top of the archive or in its single top folder")]
    problems = _check_against_manifest(vetted, free, dest)
    if problems:
        return problems
    try:
        _write(path, vetted, dest)
    except Overflow as exc:
        return [ArtifactProblem(path.name, f"refused: the archive {exc}")]
    except (*STREAM_ERRORS, FileExistsError) as exc:
        return [ArtifactProblem(path.name, f"cannot extract ({exc.__class__.__name__}: {exc})")]
    return []
