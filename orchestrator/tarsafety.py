"""Which tar members bench reads: plain files and folders with safe relative names, nothing else.

One rule for dataset archives (``data.fetch``) and artifact archives (``artifacts.extract``). It is
stricter than Python's ``tarfile.data_filter``, which still lets links inside the destination and
sparse files through: bench never needs either, so any link, device, FIFO or sparse member refuses
the archive.
"""

from __future__ import annotations

import re
import tarfile

_DRIVE = re.compile(r"^[A-Za-z]:")


def member_problem(member: tarfile.TarInfo, hard_links: bool = False) -> str | None:
    """Why ``member`` may not be read or extracted (None: a plain file or folder with a safe relative name).

    ``hard_links``: let a hard link through (artifact archives store a hard-linked file once); the caller
    must then check its target is a regular file member it has already accepted."""
    name = member.name
    if not name or "\x00" in name:
        return "empty or malformed name"
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
    if member.ischr() or member.isblk():
        return "not a regular file (device)"
    if member.isfifo():
        return "not a regular file (FIFO)"
    if member.issparse():
        return "sparse file"
    if not (member.isfile() or member.isdir() or member.islnk()):
        return f"not a regular file (type {member.type!r})"
    return None
