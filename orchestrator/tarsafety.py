"""Which tar members bench reads: plain files and folders with safe relative names, nothing else.

One rule for dataset archives (``data.fetch``) and artifact archives (``artifacts.extract``). Every
member first goes through Python's own ``tarfile.data_filter`` (absolute paths, paths or links
leading outside the destination, devices and FIFOs); bench then adds what that filter lets through
and bench never needs: any symbolic link, a hard link (unless the caller allows and checks it),
``..`` even inside the destination, backslashes, drive letters and sparse files. Folders skip the
filter: its path checks cost ~70 us a member (a folder bomb has 10,000s), bench's lexical rules on
names are stricter, and bench creates folders itself (mode 0755). Each refusal is one short reason;
the callers name the member and raise BadInput (exit 2) or an artifact problem.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

_DRIVE = re.compile(r"^[A-Za-z]:")
# Where vetting pretends to extract when the caller extracts nothing (data.fetch reads members in memory):
# no file system lookup happens under a folder that does not exist, so the filter's checks stay lexical.
VIRTUAL_DEST = "/nonexistent/bench-archive-vetting"


def _kind(member: tarfile.TarInfo) -> str:
    return "symbolic link" if member.issym() else "hard link"


def filter_problem(member: tarfile.TarInfo, dest: str | Path = VIRTUAL_DEST) -> str | None:
    """Why ``tarfile.data_filter`` refuses ``member`` for extraction into ``dest`` (None: it accepts it
    unchanged in name; a leading '/' it would strip counts as an absolute path)."""
    try:
        safe = tarfile.data_filter(member, str(dest))
    except tarfile.SpecialFileError:
        kind = "device" if member.ischr() or member.isblk() else "FIFO" if member.isfifo() else f"type {member.type!r}"
        return f"not a regular file ({kind}; refused by tarfile's data filter)"
    except tarfile.AbsolutePathError:
        return "absolute path (refused by tarfile's data filter)"
    except tarfile.OutsideDestinationError:
        return "'..' in the path leads outside the destination (refused by tarfile's data filter)"
    except tarfile.AbsoluteLinkError:
        return f"{_kind(member)} to the absolute path {member.linkname!r} (refused by tarfile's data filter)"
    except tarfile.LinkOutsideDestinationError:
        return f"{_kind(member)} to {member.linkname!r}, outside the destination (refused by tarfile's data filter)"
    except tarfile.FilterError as exc:
        return f"refused by tarfile's data filter ({exc})"
    if safe.name != member.name:
        return "absolute path (tarfile's data filter would strip its leading '/')"
    return None


def member_problem(member: tarfile.TarInfo, hard_links: bool = False, dest: str | Path = VIRTUAL_DEST) -> str | None:
    """Why ``member`` may not be read or extracted into ``dest`` (None: a plain file or folder with a safe
    relative name).

    ``hard_links``: let a hard link through (artifact archives store a hard-linked file once); the caller
    must then check its target is a regular file member it has already accepted."""
    name = member.name
    if not name or "\x00" in name or "\x00" in member.linkname:
        return "empty or malformed name"
    why = None if member.isdir() else filter_problem(member, dest)
    if why is not None:
        return why
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return "absolute path"
    if ".." in re.split(r"[/\\]", name):
        return "'..' in the path"
    if "\\" in name:
        return "backslash in the path"
    if member.issym():
        return f"symbolic link to {member.linkname!r}"
    if member.islnk() and not hard_links:
        return f"hard link to {member.linkname!r}"
    if member.issparse():
        return "sparse file"
    if not (member.isfile() or member.isdir() or member.islnk()):
        return f"not a regular file (type {member.type!r})"
    return None
