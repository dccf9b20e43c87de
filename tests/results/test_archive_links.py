"""Archives of artifacts with hard-linked shared files: each stored once, restored as links, every
``bench results`` verb reads the archive back, and ``--out`` failures are one line (exit 2)."""

from __future__ import annotations

import errno
import os
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.artifacts import extract
from orchestrator.artifacts.archive import create_archive
from tests.results.helpers import run_cli

RUNS = {("pytorch", "bf16"): [100.0, 101.0, 99.0, 100.5], ("jax", "bf16"): [90.0, 91.0, 89.0, 90.5]}
WEIGHTS = 4 << 20  # incompressible bytes of the shared file


def _with_shared_weights(folder: Path) -> Path:
    """The artifact with bench's layout of shared weights: init/<file>, hard-linked into every run."""
    from orchestrator.artifacts import Artifact, seal, write_manifest

    shared = folder / "init" / "resnet50_v1.5-c10-ch3-seed0.safetensors"
    shared.parent.mkdir()
    shared.write_bytes(os.urandom(WEIGHTS))
    for run in sorted((folder / "runs").iterdir()):
        os.link(shared, run / "init.safetensors")
    seal.start(folder, trust_current=True)  # files added by hand, after the manifest sealed the artifact: adopt them
    write_manifest(Artifact(folder, "synthetic", folder.name), complete=True)
    return folder


@pytest.fixture()
def artifact(make_artifact: Callable[..., Path]) -> Path:
    return _with_shared_weights(make_artifact(RUNS))


def _size_links_once(folder: Path) -> int:
    seen, total = set(), 0
    for path in folder.rglob("*"):
        info = path.lstat()
        if path.is_file() and (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += info.st_size
    return total


def test_hard_links_stored_once_and_restored(artifact: Path, tmp_path: Path) -> None:
    archive = create_archive(artifact, tmp_path / "a.tar.gz")
    assert archive.stat().st_size <= 1.2 * _size_links_once(artifact)
    with tarfile.open(archive) as tar:
        links = [m for m in tar.getmembers() if m.islnk()]
        data = [m for m in tar.getmembers() if m.isfile() and m.size == WEIGHTS]
    assert len(data) == 1 and data[0].name.endswith(".safetensors") and "/init/" in data[0].name
    assert len(links) == 8 and all(m.linkname == data[0].name for m in links)
    with tempfile.TemporaryDirectory(dir=tmp_path) as dest:
        assert extract.extract_bounded(archive, Path(dest)) == []
        restored = sorted(Path(dest).rglob("init.safetensors"))
        assert len(restored) == 8 and len({p.stat().st_ino for p in restored}) == 1 and restored[0].stat().st_nlink == 9


def test_every_results_verb_reads_the_archive(artifact: Path, make_artifact: Callable[..., Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    archive = create_archive(artifact, tmp_path / "a.tar.gz")
    other = create_archive(_with_shared_weights(make_artifact(RUNS)), tmp_path / "b.tar.gz")
    for args in (["validate", archive], ["show", archive], ["show", archive, "--json"], ["compare", archive, other],
                 ["report", archive, "--out", tmp_path / "report"]):
        code, out, err = run_cli(["results", *args], monkeypatch, capsys)
        assert code == 0 and "warning" not in err, (args, err)
        assert args[0] != "show" or "pytorch" in out, out
    assert (tmp_path / "report" / "report.md").is_file()


def test_small_temporary_folder(artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Free space is checked against what the archive writes (links once), not a fixed amount: a 64 MB
    temporary folder holds this archive; one smaller than its content refuses it, in one line."""
    import shutil

    archive = create_archive(artifact, tmp_path / "a.tar.gz")
    usage = shutil.disk_usage(tmp_path)
    for free, code_wanted in ((64 << 20, 0), (WEIGHTS // 2, 1)):
        monkeypatch.setattr(extract.shutil, "disk_usage", lambda _p, free=free: type(usage)(usage.total, usage.total - free, free))
        code, _, err = run_cli(["results", "validate", archive], monkeypatch, capsys)
        assert code == code_wanted, err
        if code_wanted:
            assert "free" in err, err


def test_out_where_nothing_can_be_written(artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture) -> None:
    locked = tmp_path / "read-only"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root writes through the mode bits: make the folder refuse as a read-only mount would
            def refused(*_a, **_k):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS))
            monkeypatch.setattr(tempfile, "mkstemp", refused)
        for out in (locked / "a.tar.gz", locked / "sub" / "a.tar.gz"):
            code, _, err = run_cli(["results", "archive", artifact, "--out", out], monkeypatch, capsys)
            assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write" in err and "Traceback" not in err, err
    finally:
        locked.chmod(0o755)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_out_on_a_full_disk(artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from orchestrator.artifacts import archive as archive_module

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(archive_module, "_write_members", full)
    code, _, err = run_cli(["results", "archive", artifact, "--out", tmp_path / "out" / "a.tar.gz"], monkeypatch, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "No space left on device" in err, err
    assert list((tmp_path / "out").iterdir()) == []  # the partial archive is removed
