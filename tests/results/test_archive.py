"""``bench results archive`` and ``validate`` of archives: round trip, tampering, hostile members."""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.artifacts.archive import create_archive, validate_path
from orchestrator.artifacts.manifest import file_sha256
from tests.results.helpers import run_cli

RUNS = {("pytorch", "bf16"): [100.0, 101.0, 99.0]}


@pytest.fixture()
def artifact(make_artifact: Callable[..., Path]) -> Path:
    return make_artifact(RUNS)


@pytest.fixture()
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Route the temporary folders of the validator here, to check nothing is left behind."""
    folder = tmp_path / "private-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_round_trip(artifact: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    before = {p: file_sha256(p) for p in artifact.rglob("*") if p.is_file()}
    code, out, err = run_cli(["results", "archive", artifact, "--json"], monkeypatch, capsys)
    assert code == 0, err
    info = json.loads(out)
    archive = Path(info["archive"])
    assert archive == artifact.parents[1] / "archives" / artifact.parent.name / f"{artifact.name}.tar.gz" and info["sha256"] == file_sha256(archive)
    assert {p: file_sha256(p) for p in artifact.rglob("*") if p.is_file()} == before  # the artifact is untouched
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        assert all(n == artifact.name or n.startswith(artifact.name + "/") for n in names)
        assert f"{artifact.name}/manifest.json" in names
        assert len([m for m in tar.getmembers() if m.isfile()]) == len(before)
        assert all(m.uid == 0 and (m.isfile() or m.isdir()) for m in tar.getmembers())
    code, out, _ = run_cli(["results", "validate", archive], monkeypatch, capsys)
    assert code == 0 and "valid" in out
    assert list(private_tmp.iterdir()) == []  # the extraction folder is gone
    code, _, err = run_cli(["results", "archive", artifact], monkeypatch, capsys)
    assert code == 2 and "exists" in err
    code, _, err = run_cli(["results", "archive", artifact, "--force"], monkeypatch, capsys)
    assert code == 0
    code, _, err = run_cli(["results", "archive", artifact, "--out", artifact / "inside.tar.gz"], monkeypatch, capsys)
    assert code == 2 and "inside the artifact" in err
    code, out, _ = run_cli(["results", "show", artifact], monkeypatch, capsys)  # still a sound artifact
    assert code == 0


def test_refuses_invalid_artifact(artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    (artifact / "summary.json").write_text("{}")
    code, _, err = run_cli(["results", "archive", artifact, "--out", tmp_path / "x.tar.gz"], monkeypatch, capsys)
    assert code == 2 and "not archived" in err and not (tmp_path / "x.tar.gz").exists()


def _rewrite(archive: Path, target: Path, change: Callable[[tarfile.TarInfo, bytes], bytes]) -> Path:
    """A copy of ``archive`` whose file contents went through ``change``."""
    with tarfile.open(archive) as src, tarfile.open(target, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else b""
            if member.isfile():
                data = change(member, data)
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return target


def test_tampered_and_truncated_archives(artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture) -> None:
    archive = create_archive(artifact, tmp_path / "a.tar.gz")
    tampered = _rewrite(archive, tmp_path / "t.tar.gz", lambda m, d: b"changed\n" if m.name.endswith("engine.log") else d)
    problems = [str(p) for p in validate_path(tampered)]
    assert problems and all("sha256 differs" in p for p in problems)
    code, _, err = run_cli(["results", "validate", tampered], monkeypatch, capsys)
    assert code == 1 and "sha256 differs" in err
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    problems = validate_path(truncated)
    assert problems and ("corrupt" in str(problems[0]) or "cannot extract" in str(problems[0]) or "readable" in str(problems[0]))
    no_manifest = tmp_path / "nomanifest.tar.gz"
    with tarfile.open(no_manifest, "w:gz") as tar:
        tar.add(artifact / "summary.json", arcname="x/summary.json")
    assert "no manifest.json" in str(validate_path(no_manifest)[0])


def _hostile(path: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        ok = tarfile.TarInfo("a/manifest.json")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"{}"))
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", data: bytes = b"") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize("case", ["absolute", "dotdot", "dotdot-deep", "symlink", "hardlink", "chardev", "blockdev", "fifo",
                                  "backslash", "duplicate"])
def test_hostile_archives(case: str, tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture) -> None:
    escape = tmp_path / "escaped.txt"
    payload = b"pwned\n"
    member = {
        "absolute": _member(str(escape), data=payload),
        "dotdot": _member("../../escaped.txt", data=payload),
        "dotdot-deep": _member("a/runs/../../../escaped.txt", data=payload),
        "symlink": _member("a/link", tarfile.SYMTYPE, linkname=str(escape)),
        "hardlink": _member("a/hard", tarfile.LNKTYPE, linkname="/etc/passwd"),
        "chardev": _member("a/dev", tarfile.CHRTYPE),
        "blockdev": _member("a/blk", tarfile.BLKTYPE),
        "fifo": _member("a/fifo", tarfile.FIFOTYPE),
        "backslash": _member("a\\..\\..\\escaped.txt", data=payload),
        "duplicate": _member("a/manifest.json", data=payload),
    }[case]
    archive = _hostile(tmp_path / f"{case}.tar.gz", member, payload if member.isfile() else b"")
    problems = validate_path(archive)
    assert problems and any("unsafe archive member" in str(p) for p in problems), problems
    assert not escape.exists()
    assert list(private_tmp.iterdir()) == []  # refused before anything was extracted
    code, _, err = run_cli(["results", "validate", archive], monkeypatch, capsys)
    assert code == 1 and "unsafe archive member" in err
    code, _, err = run_cli(["results", "report", archive, "--out", tmp_path / "rep"], monkeypatch, capsys)
    assert code == 2 and "refused" in err
    assert not escape.exists()
