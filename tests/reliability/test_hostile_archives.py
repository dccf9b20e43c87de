"""Hostile archives: sparse and compression bombs, unlisted and resized members, links: refused with
bounded time and disk, nothing written outside a private temporary folder (and that folder removed)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.artifacts import extract
from orchestrator.artifacts.archive import validate_path
from tests.reliability.hostile_support import call, disk_bytes, save_figures, timed

MANIFEST_FILES: list[dict] = []


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


@pytest.fixture()
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Extraction goes to a private folder; its peak disk use is measured after the write pass."""
    folder = tmp_path / "private-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    peak = {"bytes": 0}
    write = extract._write

    def measured(path, vetted, dest):
        try:
            write(path, vetted, dest)
        finally:
            peak["bytes"] = max(peak["bytes"], disk_bytes(dest))

    monkeypatch.setattr(extract, "_write", measured)
    yield peak
    assert list(folder.iterdir()) == []  # removed afterwards, refused or not


def _manifest(files: dict[str, int]) -> bytes:
    return json.dumps({"schema_version": 1, "scenario": "s", "artifact_id": "a", "created_at": "now", "bench_version": "0",
                       "complete": True, "files": [{"path": p, "sha256": "0" * 64, "bytes": n} for p, n in files.items()]}).encode()


def _sparse_header(name: str, real: int) -> bytes:
    """An old-GNU sparse member header: no data in the archive, ``real`` bytes of zeros once extracted."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.GNUTYPE_SPARSE
    buf = bytearray(info.tobuf(tarfile.GNU_FORMAT)[:512])
    buf[386:398] = b"%011o\x00" % (real - 1)
    buf[398:410] = b"%011o\x00" % 0
    buf[483:495] = b"%011o\x00" % real
    buf[148:156] = b" " * 8
    buf[148:155] = b"%06o\x00" % sum(buf)
    return bytes(buf)


def _archive(path: Path, manifest: bytes, members: list[tuple[tarfile.TarInfo, bytes | None]], raw_tail: bytes = b"") -> Path:
    body = io.BytesIO()
    with tarfile.open(fileobj=body, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("a/manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
        end = tar.offset  # before the end-of-archive blocks
    data = body.getvalue()[:end] + raw_tail + b"\0" * 1024
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(data)
    return path


def _zeros_member(name: str, size: int) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = size
    return info, bytes(size)


def _check_refused(path: Path, needle: str, peak: dict[str, int], capsys, monkeypatch, escape: Path | None = None) -> None:
    with timed("archives: hostile archives") as box:
        problems = " ".join(map(str, validate_path(path)))
        box["disk"] = peak["bytes"]
    assert needle in problems, problems
    code, _, err = call(capsys, monkeypatch, "results", "validate", str(path))
    assert code == 1 and needle in err
    code, _, err = call(capsys, monkeypatch, "results", "report", str(path), "--out", str(path.parent / "rep"))
    assert code == 2 and "refused" in err
    assert peak["bytes"] == 0  # refused before anything was written
    if escape is not None:
        assert not escape.exists()


def test_sparse_bomb(tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    path = _archive(tmp_path / "sparse.tar.gz", _manifest({"big": 1 << 30}), [], raw_tail=_sparse_header("a/big", 1 << 30))
    assert path.stat().st_size < 1024
    _check_refused(path, "sparse file", private_tmp, capsys, monkeypatch)


def test_gzip_bomb_unlisted(tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    path = _archive(tmp_path / "bomb.tar.gz", _manifest({}), [_zeros_member("a/zeros", 64 << 20)])
    assert path.stat().st_size < 1 << 20
    _check_refused(path, "not listed in the manifest", private_tmp, capsys, monkeypatch)


def _free_space(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    """The destination of the extraction has ``free`` bytes free."""
    import shutil

    usage = shutil.disk_usage("/")
    monkeypatch.setattr(extract.shutil, "disk_usage", lambda _path: type(usage)(usage.total, usage.total - free, free))


def test_gzip_bomb_past_the_free_space(tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    """Listed with its true size, but more than the destination holds: the decompressed stream stops there."""
    _free_space(monkeypatch, 8 << 20)
    monkeypatch.setattr(extract, "MAX_MANIFEST", 1 << 20)
    path = _archive(tmp_path / "bomb.tar.gz", _manifest({"zeros": 64 << 20}), [_zeros_member("a/zeros", 64 << 20)])
    _check_refused(path, "expands beyond", private_tmp, capsys, monkeypatch)


def test_gzip_bomb_past_the_declared_sizes(tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    """A manifest declaring 1 KiB, a member of 64 MiB: the stream stops past what the manifest declares."""
    path = _archive(tmp_path / "bomb.tar.gz", _manifest({"zeros": 1024}), [_zeros_member("a/zeros", 64 << 20)])
    assert path.stat().st_size < 1 << 20
    _check_refused(path, "expands beyond", private_tmp, capsys, monkeypatch)


def test_declared_size_differs(tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    path = _archive(tmp_path / "resized.tar.gz", _manifest({"run.log": 10}), [_zeros_member("a/run.log", 4 << 20)])
    _check_refused(path, "sha256 differs from the manifest", private_tmp, capsys, monkeypatch)


@pytest.mark.parametrize("name", ["a/.payload.sh", "a/runs/x/.hidden", "b/other", "a/../../escaped"])
def test_extra_members(name: str, tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    escape = tmp_path / "escaped"
    path = _archive(tmp_path / "extra.tar.gz", _manifest({}), [(_zeros_member(name, 5)[0], b"pwned")])
    needle = "unsafe archive member" if ".." in name else ("outside the artifact" if name.startswith("b/") else "not listed")
    _check_refused(path, needle, private_tmp, capsys, monkeypatch, escape)


def test_a_valid_archive_uses_only_its_declared_bytes(tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    """The control: an honest archive passes the extraction checks and writes exactly what it declares."""
    data = b"x" * 5000
    manifest = _manifest({"engine.log": len(data)})
    path = _archive(tmp_path / "ok.tar.gz", manifest, [(_zeros_member("a/engine.log", len(data))[0], data)])
    with tempfile.TemporaryDirectory() as dest:
        assert extract.extract_bounded(path, Path(dest)) == []
        assert (Path(dest) / "a" / "engine.log").read_bytes() == data
    assert 5000 <= private_tmp["bytes"] <= 5000 + len(manifest) + 3 * 4096
    problems = " ".join(map(str, validate_path(path)))
    assert "sha256 differs" in problems and "not listed" not in problems  # hashes are still checked after extraction


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.LNKTYPE, target
    return info, None


@pytest.mark.parametrize("case", ["absolute", "dotdot", "later", "folder", "unlisted", "missing-target"])
def test_hostile_hard_links(case: str, tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    """A hard link is accepted only to a listed regular file member before it, inside the top folder."""
    data = b"w" * 100
    files = {"init/w": 100, "runs/r1/init.safetensors": 100}
    folder = tarfile.TarInfo("a/init")
    folder.type = tarfile.DIRTYPE
    weights = (_zeros_member("a/init/w", 100)[0], data)
    members = {
        "absolute": [weights, _link("a/runs/r1/init.safetensors", "/etc/passwd")],
        "dotdot": [weights, _link("a/runs/r1/init.safetensors", "a/../../etc/passwd")],
        "later": [_link("a/runs/r1/init.safetensors", "a/init/w"), weights],
        "folder": [(folder, None), weights, _link("a/runs/r1/init.safetensors", "a/init")],
        "unlisted": [weights, _link("a/runs/r1/extra", "a/init/w")],
        "missing-target": [_link("a/runs/r1/init.safetensors", "a/nothing")],
    }[case]
    path = _archive(tmp_path / f"{case}.tar.gz", _manifest(files), members)
    needle = "not listed" if case == "unlisted" else "hard link"
    _check_refused(path, needle, private_tmp, capsys, monkeypatch, tmp_path / "etc")


def test_hard_link_control(tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    """The control: a listed link to a listed file before it is restored as a link, nothing else written."""
    data = b"w" * 5000
    files = {"init/w": 5000, "runs/r1/init.safetensors": 5000}
    path = _archive(tmp_path / "ok.tar.gz", _manifest(files), [(_zeros_member("a/init/w", 5000)[0], data),
                                                               _link("a/runs/r1/init.safetensors", "a/init/w")])
    with tempfile.TemporaryDirectory() as dest:
        assert extract.extract_bounded(path, Path(dest)) == []
        link = Path(dest) / "a" / "runs" / "r1" / "init.safetensors"
        assert link.read_bytes() == data and link.stat().st_nlink == 2
    assert private_tmp["bytes"] <= 5000 + 3 * 4096 + 4096  # the data once


def _many_folders(path: Path, count: int, manifest_first: bool) -> Path:
    """``count`` folder members that hold no listed file, after (or before) the manifest."""
    manifest = _manifest({})
    head = tarfile.TarInfo("a/manifest.json")
    head.size = len(manifest)
    blocks = head.tobuf(tarfile.GNU_FORMAT) + manifest + b"\0" * (-len(manifest) % 512)
    folder = tarfile.TarInfo("a/d")
    folder.type = tarfile.DIRTYPE
    with gzip.open(path, "wb", compresslevel=1) as handle:
        if manifest_first:
            handle.write(blocks)
        for index in range(count):
            folder.name = f"a/d{index}"
            handle.write(folder.tobuf(tarfile.GNU_FORMAT))
        if not manifest_first:
            handle.write(blocks)
        handle.write(b"\0" * 1024)
    return path


@pytest.mark.parametrize("manifest_first", [True, False])
def test_150000_unlisted_folders(manifest_first: bool, tmp_path: Path, private_tmp, capsys, monkeypatch) -> None:
    path = _many_folders(tmp_path / "folders.tar.gz", 150_000, manifest_first)
    needle = "a folder holding no listed file" if manifest_first else f"more than {extract.PRE_MANIFEST_MEMBERS} before"
    _check_refused(path, needle, private_tmp, capsys, monkeypatch)


def test_small_temporary_folder_holds_a_small_archive(tmp_path: Path, private_tmp, monkeypatch) -> None:
    """A 64 MB temporary folder (less than any fixed margin of 64 MiB) extracts a small valid archive;
    one with less free space than the content needs refuses it, before writing anything."""
    data = b"x" * 20_000
    path = _archive(tmp_path / "ok.tar.gz", _manifest({"engine.log": len(data)}), [(_zeros_member("a/engine.log", len(data))[0], data)])
    _free_space(monkeypatch, 64_000_000)
    with tempfile.TemporaryDirectory() as dest:
        assert extract.extract_bounded(path, Path(dest)) == []
    _free_space(monkeypatch, 16_000)
    with tempfile.TemporaryDirectory() as dest:
        problems = " ".join(map(str, extract.extract_bounded(path, Path(dest))))
        assert "free" in problems and not any(Path(dest).iterdir()), problems
