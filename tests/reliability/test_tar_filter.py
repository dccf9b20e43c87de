"""tarsafety uses tarfile's data filter: members only that filter refuses say so (these fail without it),
and a setuid, world-writable member is extracted as a plain 0644 file. Everything stays in tmp_path."""

from __future__ import annotations

import io
import json
import stat
import tarfile
from pathlib import Path

import pytest

from orchestrator.artifacts.extract import extract_bounded
from orchestrator.data.fetch import read_tar_members
from orchestrator.errors import BadInput
from orchestrator.tarsafety import member_problem

FILTER = "tarfile's data filter"


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, mode
    return info


@pytest.mark.parametrize(("member", "hard_links", "words"), [
    (_member("/abs/file"), False, "absolute path"),
    (_member("a/dev", tarfile.CHRTYPE), False, "not a regular file (device"),
    (_member("a/blk", tarfile.BLKTYPE), False, "not a regular file (device"),
    (_member("a/fifo", tarfile.FIFOTYPE), False, "not a regular file (FIFO"),
    (_member("a/../../out"), False, "outside the destination"),
    (_member("a/link", tarfile.SYMTYPE, "/etc/passwd"), False, "symbolic link to the absolute path '/etc/passwd'"),
    (_member("a/link", tarfile.SYMTYPE, "../../out"), False, "symbolic link to '../../out', outside"),
    # hard links the caller allows: only the filter refuses these at the member (the caller checks the target)
    (_member("a/hard", tarfile.LNKTYPE, "/etc/passwd"), True, "hard link to the absolute path"),
    (_member("a/hard", tarfile.LNKTYPE, "../../out"), True, "hard link to '../../out', outside"),
], ids=["absolute", "chardev", "blockdev", "fifo", "escape", "symlink-abs", "symlink-out", "hardlink-abs", "hardlink-out"])
def test_the_data_filter_refuses(member: tarfile.TarInfo, hard_links: bool, words: str, tmp_path: Path) -> None:
    why = member_problem(member, hard_links=hard_links, dest=tmp_path)
    assert why is not None and words in why and FILTER in why, why
    assert member_problem(member, hard_links=hard_links) == why  # the same without a destination (nothing extracted)


def test_plain_members_pass(tmp_path: Path) -> None:
    assert member_problem(_member("a/file", mode=0o6777), dest=tmp_path) is None  # setuid: stripped, not refused
    assert member_problem(_member("a/dir", tarfile.DIRTYPE), dest=tmp_path) is None
    assert member_problem(_member("a/hard", tarfile.LNKTYPE, "a/file"), hard_links=True, dest=tmp_path) is None


def test_dataset_archive_names_the_member(tmp_path: Path) -> None:
    archive = tmp_path / "data.tar"
    with tarfile.open(archive, "w") as tar:
        tar.addfile(_member("top/fifo", tarfile.FIFOTYPE))
    with pytest.raises(BadInput, match=r"unsafe member 'top/fifo' \(not a regular file \(FIFO; refused by tarfile's data filter\)\)"):
        read_tar_members(archive, ["top/x"])


def test_setuid_world_writable_member_is_extracted_0644(tmp_path: Path) -> None:
    data = b"#!/bin/sh\n"
    manifest = json.dumps({"schema_version": 1, "scenario": "s", "artifact_id": "a", "created_at": "now", "bench_version": "0",
                           "complete": True, "files": [{"path": "tool.sh", "sha256": "0" * 64, "bytes": len(data)}]}).encode()
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        head = _member("a/manifest.json")
        head.size = len(manifest)
        tar.addfile(head, io.BytesIO(manifest))
        tool = _member("a/tool.sh", mode=0o6777)
        tool.size = len(data)
        tar.addfile(tool, io.BytesIO(data))
    dest = tmp_path / "dest"
    dest.mkdir()
    assert extract_bounded(archive, dest) == []
    mode = (dest / "a" / "tool.sh").stat().st_mode
    assert stat.S_IMODE(mode) == 0o644 and not mode & (stat.S_ISUID | stat.S_ISGID)
