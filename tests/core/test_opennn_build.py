"""Building the OpenNN engine: bad source archives, the checksum-keyed cache, `bench env`, image context.

Archive errors are reported before build.sh looks for a toolchain, so those tests run with the
toolchain hidden (a stock machine); tests that need the real archives or g++ skip without them
unless BENCH_REQUIRE_OPENNN=1 (CI), where they fail (tests/toolchains.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.toolchains import opennn_vendor, path_without, require_tools, unavailable

SOURCES = [line.split() for line in (REPO / "images/opennn/sources.txt").read_text().splitlines() if line and not line.startswith("#")]


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})}, timeout=300)


def fake_vendor(folder: Path, corrupt: str | None = None, missing: str | None = None) -> Path:
    """Archives named as sources.txt pins them (tiny stand-ins: the checksum check runs first)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, file, *_ in SOURCES:
        if name != missing:
            (folder / file).write_bytes(b"not the pinned archive" if name == corrupt else b"x")
    return folder


@pytest.fixture()
def no_toolchain(tmp_path: Path) -> dict[str, str]:
    """The environment of a stock machine: no compiler, cmake, ninja or ccache on PATH."""
    return {"PATH": path_without(tmp_path / "stock-bin"), "CXX": ""}


def test_a_corrupt_archive_is_one_line_exit_2(tmp_path: Path, no_toolchain: dict[str, str]) -> None:
    vendor = fake_vendor(tmp_path / "vendor", corrupt="opennn")
    proc = bench("env", "create", "opennn", "--vendor", str(vendor), env={**no_toolchain, "BENCH_OPENNN_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "opennn-5ffbaa62.tar.gz" in last and "sha256" in last and "corrupt" in last
    assert "Traceback" not in proc.stderr


def test_a_missing_archive_or_vendor_folder_is_one_line_exit_2(tmp_path: Path, no_toolchain: dict[str, str]) -> None:
    vendor = fake_vendor(tmp_path / "vendor", missing="eigen")
    cache = {**no_toolchain, "BENCH_OPENNN_CACHE": str(tmp_path / "cache")}
    proc = bench("env", "create", "opennn", "--vendor", str(vendor), env=cache)
    assert proc.returncode == 2 and "source archive missing" in proc.stderr.strip().splitlines()[-1] and "eigen-5.0.1.tar.gz" in proc.stderr
    proc = bench("env", "create", "opennn", "--vendor", str(tmp_path / "nowhere"), env=cache)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(f"--vendor {tmp_path / 'nowhere'}: not a folder")
    proc = bench("env", "create", "opennn", env={**cache, "BENCH_OPENNN_VENDOR": ""})
    assert proc.returncode == 2 and "BENCH_OPENNN_VENDOR" in proc.stderr.strip().splitlines()[-1]


def test_the_archive_check_keeps_quiet_on_archives_matching_their_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from orchestrator.errors import BadInput
    from orchestrator.opennn_build import check_archives, locate_module

    locate = locate_module()
    vendor = fake_vendor(tmp_path / "vendor")
    pins = [locate.Source(name, file, hashlib.sha256(b"x").hexdigest(), up, commit) for name, file, _, up, commit in SOURCES]
    monkeypatch.setattr(locate, "sources", lambda folder: pins)
    check_archives(vendor)
    (vendor / pins[1].file).write_bytes(b"y")
    with pytest.raises(BadInput, match=f"source archive corrupt: {vendor / pins[1].file} has sha256"):
        check_archives(vendor)


def test_good_archives_without_a_toolchain_stop_at_the_toolchain(tmp_path: Path, no_toolchain: dict[str, str]) -> None:
    """The archive check keeps quiet on the pinned archives; build.sh then names the missing tool."""
    proc = bench("env", "create", "opennn", "--vendor", str(opennn_vendor()), env={**no_toolchain, "BENCH_OPENNN_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "'cmake' not found" in last and "source archive" not in proc.stderr and "Traceback" not in proc.stderr


def test_bench_env_says_why_opennn_is_unusable(tmp_path: Path) -> None:
    proc = bench("env", "--json", env={"BENCH_OPENNN_CACHE": str(tmp_path / "empty"), "BENCH_OPENNN_DRIVER": ""})
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in json.loads(proc.stdout)["engines"] if r["engine"] == "opennn")
    assert row["usable"] is False and "bench env create opennn" in row["reason"]


def test_cache_keys_follow_the_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(REPO / "images" / "opennn"))
    from bench_opennn import locate

    copy = tmp_path / "opennn"
    shutil.copytree(REPO / "images" / "opennn", copy, ignore=shutil.ignore_patterns("vendor", "ccache", "__pycache__"))
    monkeypatch.setattr(locate, "ENGINE_DIR", copy)
    lib, drv = locate.library_key("cpu"), locate.driver_key("cpu")
    assert locate.library_key("cuda-sm90") != lib
    (copy / "driver" / "main.cpp").write_text((copy / "driver" / "main.cpp").read_text() + "\n// edit\n")
    assert locate.library_key("cpu") == lib and locate.driver_key("cpu") != drv  # a driver edit rebuilds the driver only
    (copy / "sources.txt").write_text((copy / "sources.txt").read_text().replace("7ca54", "00000"))
    assert locate.library_key("cpu") != lib


def test_image_context_takes_the_vendored_archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.errors import BadInput
    from orchestrator.imagebuild.build import vendor_files
    from orchestrator.imagebuild.metadata import get_image_meta

    meta = get_image_meta("opennn")
    monkeypatch.setenv("BENCH_OPENNN_VENDOR", str(fake_vendor(tmp_path / "v")))
    files = vendor_files(meta)
    assert sorted(name for _, name in files) == sorted(f"opennn/vendor/{s[1]}" for s in SOURCES)
    monkeypatch.setenv("BENCH_OPENNN_VENDOR", str(fake_vendor(tmp_path / "w", missing="cudnn-frontend")))
    with pytest.raises(BadInput, match=r"cudnn-frontend-1\.22\.1\.tar\.gz"):
        vendor_files(meta)


def test_the_pins_match_the_vendored_archives() -> None:
    import hashlib

    vendor = opennn_vendor()
    for name, file, sha, *_ in SOURCES:
        assert hashlib.sha256((vendor / file).read_bytes()).hexdigest() == sha, name


def test_the_format_shim_stands_in_for_std_format(tmp_path: Path) -> None:
    """images/opennn/compat/format (build.sh's <format> for g++ 12) compiles and runs std::format on {fmt}."""
    cxx = require_tools("OPENNN", ["g++"], "apt-get install g++")["g++"]
    probe = subprocess.run([cxx, "-x", "c++", "-fsyntax-only", "-"], input="#include <fmt/format.h>\n", capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        unavailable("OPENNN", "the {fmt} headers are not installed (apt-get install libfmt-dev; the <format> shim needs them on g++ < 13)")
    program = tmp_path / "format.cpp"
    program.write_text('#include <format>\n#include <string>\nint main() { return std::format("{:d}-{:.2f}", 1, 0.5) == std::string("1-0.50") ? 0 : 3; }\n')
    build = subprocess.run([cxx, "-std=c++20", "-isystem", str(REPO / "images" / "opennn" / "compat"), str(program), "-o", str(tmp_path / "format")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    assert subprocess.run([str(tmp_path / "format")], timeout=60).returncode == 0
