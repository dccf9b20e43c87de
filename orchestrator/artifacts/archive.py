"""Artifacts as ``.tar.gz`` archives: write one, and validate or open a folder or an archive.

An archive holds one top folder named after the artifact with ``manifest.json`` and every file the
manifest lists (nothing else). Reading an archive never trusts it: every member is checked first
(no absolute path, no ``..``, no drive letter, no link, device, FIFO or duplicate, bounded count and
size) and an archive with any unsafe member is refused without extracting anything; a safe one is
extracted member by member (regular files and folders only) into a private temporary folder that is
removed afterwards.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from orchestrator.artifacts.layout import MANIFEST
from orchestrator.artifacts.manifest import listed_files
from orchestrator.artifacts.validate import ArtifactProblem, validate_artifact
from orchestrator.errors import BadInput

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
MAX_MEMBERS = 200_000
MAX_BYTES = 64 << 30  # refuse archives that would expand beyond 64 GiB
_DRIVE = re.compile(r"^[A-Za-z]:")


def is_archive(path: Path) -> bool:
    return path.is_file() and (path.name.endswith(ARCHIVE_SUFFIXES) or tarfile.is_tarfile(path))


def default_archive_path(folder: Path) -> Path:
    folder = folder.resolve()
    return folder.parent / f"{folder.name}.tar.gz"


def _member_problem(member: tarfile.TarInfo) -> str | None:
    name = member.name
    if not name or "\x00" in name:
        return "empty or malformed name"
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return "absolute path"
    if ".." in re.split(r"[/\\]", name):
        return "'..' in the path"
    if member.issym() or member.islnk():
        return f"link to {member.linkname!r}"
    if member.ischr() or member.isblk():
        return "device file"
    if member.isfifo():
        return "FIFO"
    if not (member.isfile() or member.isdir()):
        return f"unsupported member type {member.type!r}"
    return None


def check_members(members: list[tarfile.TarInfo]) -> list[ArtifactProblem]:
    """Problems with the members of an archive (empty: every member is safe to extract)."""
    problems: list[ArtifactProblem] = []
    if len(members) > MAX_MEMBERS:
        return [ArtifactProblem("archive", f"too many members ({len(members)} > {MAX_MEMBERS})")]
    seen: set[str] = set()
    total = 0
    for member in members:
        why = _member_problem(member)
        if why:
            problems.append(ArtifactProblem(member.name or "?", f"unsafe archive member: {why}"))
            continue
        key = PurePosixPath(member.name).as_posix().rstrip("/")
        if key in seen and not member.isdir():
            problems.append(ArtifactProblem(member.name, "unsafe archive member: duplicate name"))
        seen.add(key)
        total += max(member.size, 0)
    if total > MAX_BYTES:
        problems.append(ArtifactProblem("archive", f"expands to {total} bytes (limit {MAX_BYTES})"))
    return problems


def _read_members(path: Path) -> tuple[tarfile.TarFile | None, list[tarfile.TarInfo], list[ArtifactProblem]]:
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        return None, [], [ArtifactProblem(path.name, f"not a readable tar archive ({exc.__class__.__name__}: {exc})")]
    try:
        members = tar.getmembers()
    except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile) as exc:
        tar.close()
        return None, [], [ArtifactProblem(path.name, f"truncated or corrupt archive ({exc.__class__.__name__}: {exc})")]
    return tar, members, []


def _extract(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    """Regular files and folders only, each checked to land inside ``dest`` (already vetted members)."""
    base = dest.resolve()
    for member in members:
        target = (base / PurePosixPath(member.name)).resolve()
        if not target.is_relative_to(base):
            raise BadInput(f"archive member {member.name!r} would land outside the extraction folder")
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True, mode=0o755)
            continue
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        source = tar.extractfile(member)
        if source is None:
            raise BadInput(f"archive member {member.name!r} has no data")
        with source, open(target, "xb") as sink:
            shutil.copyfileobj(source, sink)
        os.chmod(target, 0o644)


def _artifact_root(folder: Path) -> Path | None:
    if (folder / MANIFEST).is_file():
        return folder
    children = [p for p in folder.iterdir()]
    if len(children) == 1 and children[0].is_dir() and (children[0] / MANIFEST).is_file():
        return children[0]
    return None


@contextlib.contextmanager
def _extracted(path: Path) -> Iterator[tuple[Path | None, list[ArtifactProblem]]]:
    """(artifact root inside a temporary folder, []) or (None, problems) when the archive is refused."""
    tar, members, problems = _read_members(path)
    if tar is None:
        yield None, problems
        return
    with tar:
        problems = check_members(members)
        if problems:
            yield None, problems
            return
        with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
            try:
                _extract(tar, members, Path(tmp))
            except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile) as exc:
                yield None, [ArtifactProblem(path.name, f"cannot extract ({exc.__class__.__name__}: {exc})")]
                return
            except BadInput as exc:
                yield None, [ArtifactProblem(path.name, str(exc))]
                return
            root = _artifact_root(Path(tmp))
            if root is None:
                yield None, [ArtifactProblem(path.name, f"no {MANIFEST} at the top of the archive or in its single top folder")]
                return
            yield root, []


def validate_path(path: Path) -> list[ArtifactProblem]:
    """Problems of the artifact at ``path``: a folder or a .tar.gz archive (empty list: intact)."""
    if path.is_dir():
        return validate_artifact(path)
    if path.is_file():
        with _extracted(path) as (root, problems):
            return problems if root is None else validate_artifact(root)
    return [ArtifactProblem(str(path), "not an artifact folder or archive")]


@contextlib.contextmanager
def artifact_folder(path: Path) -> Iterator[Path]:
    """A readable folder for the artifact at ``path`` (a folder as is, an archive safely extracted).

    BadInput when ``path`` is neither, or when the archive is unreadable or has unsafe members.
    """
    if path.is_dir():
        yield path
        return
    if not path.exists():
        raise BadInput(f"{path}: no such artifact folder or archive")
    with _extracted(path) as (root, problems):
        if root is None:
            raise BadInput(f"{path}: refused: " + "; ".join(str(p) for p in problems[:3])
                           + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""))
        yield root


def _tarinfo(name: str, source: Path | None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if source is None:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        info.mtime = 0
    else:
        stat = source.stat()
        info.size = stat.st_size
        info.mode = 0o644
        info.mtime = int(stat.st_mtime)
    return info


def create_archive(folder: Path, out: Path | None = None, force: bool = False) -> Path:
    """Write ``folder`` (a valid artifact) as ``out`` (.tar.gz); BadInput when it cannot or should not."""
    problems = validate_artifact(folder)
    if problems:
        raise BadInput(f"{folder}: not archived, the artifact has {len(problems)} problem(s): {problems[0]}"
                       " (see 'bench results validate')")
    root = folder.resolve()
    out = (out or default_archive_path(root)).resolve()
    if out.is_relative_to(root):
        raise BadInput(f"--out {out}: inside the artifact (writing there would modify it)")
    if out.exists() and not force:
        raise BadInput(f"{out}: exists (use --force to replace it)")
    if out.is_dir():
        raise BadInput(f"--out {out}: is a folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    top = root.name
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped, \
                    tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.addfile(_tarinfo(top, None))
                dirs: set[str] = set()
                for path in [root / MANIFEST, *listed_files(root)]:
                    rel = path.relative_to(root)
                    for parent in reversed(list(rel.parents)[:-1]):
                        if parent.as_posix() not in dirs:
                            dirs.add(parent.as_posix())
                            tar.addfile(_tarinfo(f"{top}/{parent.as_posix()}", None))
                    with open(path, "rb") as handle:
                        tar.addfile(_tarinfo(f"{top}/{rel.as_posix()}", path), handle)
            raw.flush()
            os.fsync(raw.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
