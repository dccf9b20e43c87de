"""Getting a dataset archive: local path or URL download (with progress), checksums, and reading
members of a tar archive safely (never extracted to disk).
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterable
from pathlib import Path

from orchestrator.errors import BadInput
from orchestrator.tarsafety import member_problem

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
MAX_MEMBER_BYTES = 512 << 20  # refuse a member larger than this (a CIFAR-10 batch is ~31 MB)


def is_url(source: str) -> bool:
    return urllib.parse.urlsplit(source).scheme in ("http", "https")


def split_fragment(source: str) -> tuple[str, str | None]:
    """``PATH_OR_URL#sha256=HEX`` -> (PATH_OR_URL, HEX); a scenario can pin a mirror's checksum this way."""
    location, sep, fragment = source.partition("#")
    if not sep:
        return source, None
    key, _, value = fragment.partition("=")
    if key != "sha256":
        raise BadInput(f"dataset source {source!r}: the only fragment understood is '#sha256=HEX'")
    return location, normalize_sha256(value, "#sha256")


def normalize_sha256(value: str, what: str = "--sha256") -> str:
    text = value.strip().lower()
    if not _HEX64.match(text):
        raise BadInput(f"{what}: {value!r} is not a sha256 (64 hexadecimal digits)")
    return text


def file_digests(path: Path, algorithms: Iterable[str] = ("sha256",)) -> dict[str, str]:
    digests = {name: hashlib.new(name) for name in algorithms}
    with open(path, "rb") as handle:
        while chunk := handle.read(8 << 20):
            for digest in digests.values():
                digest.update(chunk)
    return {name: digest.hexdigest() for name, digest in digests.items()}


def verify_checksum(path: Path, sha256: str, md5: str | None = None) -> str:
    """Check ``path`` against ``sha256`` (and ``md5`` when given); return its sha256 or raise BadInput."""
    digests = file_digests(path, ("sha256", "md5") if md5 else ("sha256",))
    if digests["sha256"] != sha256:
        raise BadInput(f"checksum mismatch for {path}: sha256 {digests['sha256']}, expected {sha256} "
                       "(pass --sha256 HEX for a mirror or a local copy you trust)")
    if md5 and digests["md5"] != md5:
        raise BadInput(f"checksum mismatch for {path}: md5 {digests['md5']}, expected the published {md5}")
    return digests["sha256"]


def _progress():
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


def download(url: str, dest: Path, sha256: str, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` (through ``dest.part``), checking its sha256 on the way."""
    from orchestrator import __version__

    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    request = urllib.request.Request(url, headers={"User-Agent": f"bench/{__version__}"})
    digest, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with _progress() as progress, open(part, "wb") as handle:
                task = progress.add_task(f"download {dest.name}", total=total)
                while chunk := response.read(1 << 20):
                    handle.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                    progress.advance(task, len(chunk))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        part.unlink(missing_ok=True)
        reason = f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError) else getattr(exc, "reason", None) or exc
        raise BadInput(f"cannot download {url}: {reason} (pass --source PATH to a local copy)") from None
    if total is not None and size != total:
        part.unlink(missing_ok=True)
        raise BadInput(f"download of {url} is truncated: {size} of {total} bytes")
    if digest.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise BadInput(f"checksum mismatch for {url}: sha256 {digest.hexdigest()}, expected {sha256} "
                       "(pass --sha256 HEX for a mirror you trust)")
    os.replace(part, dest)
    return dest


def _member_name(member: tarfile.TarInfo) -> str:
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/")


def read_tar_members(archive: Path, wanted: Iterable[str], max_bytes: int = MAX_MEMBER_BYTES) -> dict[str, bytes]:
    """The bytes of the ``wanted`` members, read in one pass straight from the archive (nothing is
    extracted). Every member is checked: an absolute path, '..', a link, a device or a duplicate
    refuses the whole archive. A truncated or corrupt archive, or a missing member, is BadInput."""
    wanted = set(wanted)
    found: dict[str, bytes] = {}
    seen: set[str] = set()
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for member in tar:
                why = member_problem(member)
                if why:
                    raise BadInput(f"archive {archive} has an unsafe member {member.name!r} ({why}); refusing it")
                name = _member_name(member)
                if name in seen and not member.isdir():
                    raise BadInput(f"archive {archive} has member {member.name!r} twice; refusing it")
                seen.add(name)
                if name in wanted and member.isfile():
                    if member.size > max_bytes:
                        raise BadInput(f"archive {archive}: member {member.name!r} is {member.size} bytes, more than the {max_bytes} allowed")
                    handle = tar.extractfile(member)
                    assert handle is not None
                    data = handle.read()
                    if len(data) != member.size:
                        raise EOFError(f"member {member.name!r} ends early")
                    found[name] = data
    except BadInput:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise BadInput(f"cannot read archive {archive}: truncated or corrupt ({exc.__class__.__name__}: {exc})") from None
    missing = sorted(wanted - found.keys())
    if missing:
        raise BadInput(f"archive {archive} lacks member {missing[0]}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return found
