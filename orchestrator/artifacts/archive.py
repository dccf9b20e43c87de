"""Artifacts as ``.tar.gz`` archives: write one, and validate or open a folder or an archive.

An archive holds one top folder named after the artifact with ``manifest.json`` and every file the
manifest lists (nothing else). Reading an archive never trusts it (see :mod:`orchestrator.artifacts.extract`):
every member is vetted and every file checked against the manifest's declared size before anything
is written, the decompressed stream is bounded, and a safe archive is extracted into a private
temporary folder that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from orchestrator.artifacts.extract import extract_bounded
from orchestrator.artifacts.layout import ARCHIVES, MANIFEST, open_artifact, results_root
from orchestrator.artifacts.manifest import listed_files
from orchestrator.artifacts.validate import ArtifactProblem, validate_artifact
from orchestrator.errors import BadInput


def default_archive_path(folder: Path, scenario: str) -> Path:
    """``<results>/archives/<scenario>/<folder name>.tar.gz`` (see :func:`~orchestrator.artifacts.layout.results_root`)."""
    folder = folder.resolve()
    return results_root(folder, scenario) / ARCHIVES / scenario / f"{folder.name}.tar.gz"


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
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        problems = extract_bounded(path, Path(tmp))
        if problems:
            yield None, problems
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


def _tarinfo(name: str, source: Path | None, link_to: str | None = None) -> tarfile.TarInfo:
    """A normalised member: a folder (no ``source``), a file, or a hard link to the file member ``link_to``."""
    info = tarfile.TarInfo(name)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if source is None:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        info.mtime = 0
        return info
    stat = source.stat()
    info.mode = 0o644
    info.mtime = int(stat.st_mtime)
    if link_to is not None:
        info.type, info.linkname, info.size = tarfile.LNKTYPE, link_to, 0
    else:
        info.size = stat.st_size
    return info


def _write_members(tar: tarfile.TarFile, root: Path) -> None:
    """The top folder, the manifest first, then every listed file; a file hard-linked to one already
    stored becomes a hard-link member (stored once, restored as a link by the extraction)."""
    top = root.name
    tar.addfile(_tarinfo(top, None))
    dirs: set[str] = set()
    stored: dict[tuple[int, int], str] = {}  # (device, inode) -> the member name holding its data
    for path in [root / MANIFEST, *listed_files(root)]:
        rel = path.relative_to(root)
        for parent in reversed(list(rel.parents)[:-1]):
            if parent.as_posix() not in dirs:
                dirs.add(parent.as_posix())
                tar.addfile(_tarinfo(f"{top}/{parent.as_posix()}", None))
        name = f"{top}/{rel.as_posix()}"
        stat = path.stat()
        identity = (stat.st_dev, stat.st_ino)
        if stat.st_nlink > 1 and identity in stored:
            tar.addfile(_tarinfo(name, path, link_to=stored[identity]))
            continue
        with open(path, "rb") as handle:
            tar.addfile(_tarinfo(name, path), handle)
        if stat.st_nlink > 1:
            stored[identity] = name


def create_archive(folder: Path, out: Path | None = None, force: bool = False) -> Path:
    """Write ``folder`` (a valid artifact) as ``out`` (.tar.gz); BadInput when it cannot or should not
    (an invalid artifact, an output inside it, an existing one, a place that cannot be written, a full disk)."""
    problems = validate_artifact(folder)
    if problems:
        raise BadInput(f"{folder}: not archived, the artifact has {len(problems)} problem(s): {problems[0]}"
                       " (see 'bench results validate')")
    root = folder.resolve()
    out = (out or default_archive_path(root, open_artifact(root).scenario)).resolve()
    if out.is_relative_to(root):
        raise BadInput(f"--out {out}: inside the artifact (writing there would modify it)")
    if out.exists() and not force:
        raise BadInput(f"{out}: exists (use --force to replace it)")
    if out.is_dir():
        raise BadInput(f"--out {out}: is a folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write there ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped, \
                    tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
                _write_members(tar, root)
            raw.flush()
            os.fsync(raw.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BadInput(f"--out {out}: cannot write the archive ({exc.strerror or exc}); nothing was written") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
