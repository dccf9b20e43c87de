"""`bench data prepare cifar10`: checksum, safe reading, conversion, cache, errors (exit 2, one line)."""

from __future__ import annotations

import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from bench_engine.data import split_sha256
from orchestrator.data import cifar10
from orchestrator.data.sources import prepare_named
from orchestrator.data.store import list_splits
from orchestrator.errors import BadInput
from tests.data.cifar_fixture import LABEL_NAMES, TOP, batch_members, sha256_of, to_nhwc, write_tar


def one_line_error(result, *needles: str) -> None:
    """Exit 2 and a single ``error:`` message (Rich may soft-wrap it at the console width: unwrap first)."""
    assert result.code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error:") and result.stderr.count("error:") == 1, result.stderr
    assert "Traceback" not in result.stderr
    line = "".join(result.stderr.splitlines())
    for needle in needles:
        assert needle in line, line


def nothing_prepared(cache: Path) -> None:
    assert not list(cache.glob("cifar10/prepared-*.json"))
    assert not [p for p in cache.glob("cifar10/*") if p.is_dir()], "no split folder, complete or temporary, is left"


def test_official_checksums_are_pinned():
    assert cifar10.OFFICIAL_SHA256 == "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
    assert cifar10.OFFICIAL_MD5 == "c58f30108f718f92721af3b95e74349a"


def test_prepare_converts_hashes_and_counts(bench, cache, cifar_archive):
    result = bench("data", "prepare", "cifar10", "--source", str(cifar_archive.path), "--sha256", cifar_archive.sha256, "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["name"] == "cifar10" and doc["synthetic"] is False and doc["cached"] is False
    assert doc["sha256"] == cifar_archive.sha256
    assert doc["path"] == str(cache / "cifar10")
    assert doc["samples"] == {"train": 100, "test": 20}
    names = [n.decode() for n in LABEL_NAMES]
    for split, labels in (("train", cifar_archive.train_labels), ("test", cifar_archive.test_labels)):
        expected = {name: int((labels == i).sum()) for i, name in enumerate(names)}
        assert doc["class_counts"][split] == expected
        assert sum(expected.values()) == doc["samples"][split]
    train = Path(doc["splits"]["train"]["path"])
    assert split_sha256(train) == doc["splits"]["train"]["sha256"]
    images = np.load(train / "images.npy")
    assert images.dtype == np.uint8 and images.shape == (100, 32, 32, 3)
    np.testing.assert_array_equal(images, to_nhwc(cifar_archive.train_rows))
    np.testing.assert_array_equal(np.load(train / "labels.npy"), cifar_archive.train_labels)
    assert np.load(train / "labels.npy").dtype == np.int32
    test = Path(doc["splits"]["test"]["path"])
    np.testing.assert_array_equal(np.load(test / "images.npy"), to_nhwc(cifar_archive.test_rows))
    # pixel (row 0, col 1) of sample 0 is archive bytes 1 (R), 1025 (G), 2049 (B)
    assert list(images[0, 0, 1]) == [cifar_archive.train_rows[0, i] for i in (1, 1025, 2049)]


def test_second_prepare_is_cached_without_reading_the_archive(cache, cifar_archive, tmp_path):
    first = prepare_named("cifar10", str(cifar_archive.path), cifar_archive.sha256)
    copy = tmp_path / "gone.tar.gz"
    again = prepare_named("cifar10", str(copy), cifar_archive.sha256)  # the file does not even exist
    assert again["cached"] is True
    assert again["splits"] == first["splits"]


def test_wrong_checksum_is_one_line_exit_2(bench_process, cache, cifar_archive):
    result = bench_process("data", "prepare", "cifar10", "--source", str(cifar_archive.path), "--sha256", "0" * 64)
    one_line_error(result, "checksum mismatch", cifar_archive.sha256)
    nothing_prepared(cache)


def test_default_checksum_is_the_official_one(bench, cache, cifar_archive):
    result = bench("data", "prepare", "cifar10", "--source", str(cifar_archive.path))
    one_line_error(result, "checksum mismatch", cifar10.OFFICIAL_SHA256, "--sha256")
    nothing_prepared(cache)


def test_malformed_sha256_flag(bench, cifar_archive):
    one_line_error(bench("data", "prepare", "cifar10", "--source", str(cifar_archive.path), "--sha256", "abc"), "--sha256", "not a sha256")


def test_truncated_archive(bench, cache, cifar_archive, tmp_path):
    data = cifar_archive.path.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    one_line_error(bench("data", "prepare", "cifar10", "--source", str(cut), "--sha256", sha256_of(cut)), "truncated or corrupt")
    nothing_prepared(cache)


def test_not_an_archive(cache, tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not gzip" * 100)
    with pytest.raises(BadInput, match="truncated or corrupt"):
        prepare_named("cifar10", str(junk), sha256_of(junk))


def test_missing_member(bench, cache, tmp_path):
    members, _ = batch_members()
    del members[f"{TOP}/data_batch_3"]
    archive = write_tar(tmp_path / "partial.tar.gz", members)
    one_line_error(bench("data", "prepare", "cifar10", "--source", str(archive), "--sha256", sha256_of(archive)),
                   "lacks member cifar-10-batches-py/data_batch_3")
    nothing_prepared(cache)


def test_missing_source_file(bench, tmp_path):
    one_line_error(bench("data", "prepare", "cifar10", "--source", str(tmp_path / "nope.tar.gz"), "--sha256", "a" * 64), "no such file")


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


HOSTILE = {
    "absolute": (lambda out: _file(str(out / "evil")), "absolute path"),
    "dotdot": (lambda out: _file("cifar-10-batches-py/../../../../../../../" + str(out / "evil").lstrip("/")), "'..'"),
    "symlink_out": (lambda out: _link(f"{TOP}/data_batch_1", "/etc/passwd", tarfile.SYMTYPE), "symbolic link"),
    "symlink_dir": (lambda out: _link(f"{TOP}/escape", str(out), tarfile.SYMTYPE), "symbolic link"),
    "hardlink_out": (lambda out: _link(f"{TOP}/hard", "../../../etc/passwd", tarfile.LNKTYPE), "hard link"),
    "hardlink": (lambda out: _link(f"{TOP}/hard", f"{TOP}/data_batch_1", tarfile.LNKTYPE), "hard link"),
    "device": (lambda out: _link(f"{TOP}/fifo", "", tarfile.FIFOTYPE), "not a regular file"),
}


@pytest.mark.parametrize("first", [True, False], ids=["before", "after"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_archive_is_refused_without_writing_outside(bench, cache, tmp_path, kind, first):
    outside = tmp_path / "outside"
    outside.mkdir()
    make, why = HOSTILE[kind]
    members, _ = batch_members()
    if kind == "symlink_out":  # the link replaces a member bench needs
        del members[f"{TOP}/data_batch_1"]
    archive = write_tar(tmp_path / "hostile.tar.gz", members, [make(outside)], first=first)
    result = bench("data", "prepare", "cifar10", "--source", str(archive), "--sha256", sha256_of(archive))
    one_line_error(result, "unsafe member", why)
    assert list(outside.iterdir()) == []
    nothing_prepared(cache)
    assert not [p for p in tmp_path.rglob("evil")]


def test_duplicate_member_is_refused(cache, tmp_path):
    members, _ = batch_members()
    archive = write_tar(tmp_path / "dup.tar.gz", members, [_file(f"{TOP}/data_batch_2")])
    with pytest.raises(BadInput, match="twice"):
        prepare_named("cifar10", str(archive), sha256_of(archive))


def test_hostile_pickle_cannot_run_code(cache, tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    members, _ = batch_members()
    members[f"{TOP}/data_batch_2"] = pickle.dumps({b"data": Evil(), b"labels": []}, protocol=2)
    archive = write_tar(tmp_path / "evil.tar.gz", members)
    with pytest.raises(BadInput, match=r"not a CIFAR-10 pickle.*not allowed"):
        prepare_named("cifar10", str(archive), sha256_of(archive))
    assert not marker.exists()
    nothing_prepared(cache)


def test_bad_batch_contents(cache, tmp_path):
    members, _ = batch_members()
    members[f"{TOP}/test_batch"] = pickle.dumps({b"data": np.zeros((4, 3072), np.uint8), b"labels": [0, 1, 2, 10]}, protocol=2)
    archive = write_tar(tmp_path / "labels.tar.gz", members)
    with pytest.raises(BadInput, match=r"labels outside 0\.\.9"):
        prepare_named("cifar10", str(archive), sha256_of(archive))


def test_samples_and_size_are_refused_for_the_archive(bench, cifar_archive):
    one_line_error(bench("data", "prepare", "cifar10", "--source", str(cifar_archive.path), "--samples", "10"), "--samples")
    one_line_error(bench("data", "prepare", "cifar10", "--size", "224"), "--size")


def test_unknown_dataset(bench):
    one_line_error(bench("data", "prepare", "mnist"), "unknown dataset 'mnist'", "cifar10", "imagenet")


def test_url_download_with_local_http_server(cache, cifar_archive):
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args, **kwargs) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(cifar_archive.path.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(BadInput, match="checksum mismatch"):
            prepare_named("cifar10", f"{base}/{cifar_archive.path.name}")  # the default (official) checksum
        assert not list((cache / "_downloads").glob("*")), "a rejected download is not kept"
        with pytest.raises(BadInput, match=r"cannot download .*HTTP 404"):
            prepare_named("cifar10", f"{base}/missing.tar.gz", cifar_archive.sha256)
        doc = prepare_named("cifar10", f"{base}/{cifar_archive.path.name}#sha256={cifar_archive.sha256}")
        assert doc["samples"] == {"train": 100, "test": 20} and doc["source"]["location"].startswith(base)
        downloaded = list((cache / "_downloads").glob("*"))
        assert [p.name for p in downloaded] == [f"{cifar_archive.sha256[:12]}-{cifar_archive.path.name}"]
        assert sha256_of(downloaded[0]) == cifar_archive.sha256
    finally:
        server.shutdown()
        server.server_close()


def test_unreachable_url_is_bad_input(cache):
    with pytest.raises(BadInput, match="cannot download"):
        prepare_named("cifar10", "http://127.0.0.1:9/cifar-10-python.tar.gz", "a" * 64)


def test_list_shows_prepared_and_synthetic(bench, cache, cifar_archive):
    assert bench("data", "prepare", "cifar10", "--source", str(cifar_archive.path), "--sha256", cifar_archive.sha256).code == 0
    assert bench("data", "prepare", "cifar10", "--source", "synthetic", "--samples", "16").code == 0
    listing = bench("data", "list", "--json")
    assert listing.code == 0, listing.stderr
    rows = listing.json()["splits"]
    real = {r["split"]: r for r in rows if not r["synthetic"]}
    synthetic = {r["split"]: r for r in rows if r["synthetic"]}
    assert {k: v["samples"] for k, v in real.items()} == {"train": 100, "test": 20}
    assert all(r["prepared"] for r in real.values())
    assert {k: v["samples"] for k, v in synthetic.items()} == {"train": 16, "test": 16}
    assert {r["sha256"] for r in rows} == {s.meta.sha256 for s in list_splits()}
    table = bench("data", "list")
    assert table.code == 0 and "cifar10" in table.stdout and "real (prepared)" in table.stdout and "synthetic" in table.stdout


def test_list_empty(bench):
    result = bench("data", "list")
    assert result.code == 0 and "no datasets prepared" in result.stderr
