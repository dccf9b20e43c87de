"""The OpenNN engine image with the real daemon: the production Dockerfile's CPU variant, built on
the local toolchain base (.ci/opennn-docker-base.sh) from the same pinned archives
(BENCH_OPENNN_VENDOR), then the seed protocol's smoke under the docker runtime."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docker.conftest import REPO, _unavailable

pytestmark = pytest.mark.docker
CXX_BASE = os.environ.get("BENCH_TEST_CXX_BASE", "bench-test-cxx:bookworm")


def bench(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def env(docker_daemon: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if subprocess.run(["docker", "image", "inspect", CXX_BASE], capture_output=True, timeout=60).returncode != 0:
        _unavailable(f"the OpenNN toolchain base {CXX_BASE} is not built (run .ci/opennn-docker-base.sh)")
    vendor = os.environ.get("BENCH_OPENNN_VENDOR") or str(REPO.parent / "shared" / "vendor")
    if not Path(vendor).is_dir():
        _unavailable(f"no pinned OpenNN archives at {vendor} (set BENCH_OPENNN_VENDOR)")
    root = tmp_path_factory.mktemp("opennn-docker")
    return {**os.environ, "BENCH_DATA_DIR": str(root / "data"), "BENCH_IMAGES_LOCK": str(root / "images.lock.json"),
            "BENCH_OPENNN_VENDOR": vendor, "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def built(env: dict[str, str]) -> dict:
    started = time.monotonic()
    proc = bench("image", "build", "opennn", "--base", CXX_BASE, "--json", "-q", env=env, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    entry = json.loads(proc.stdout)
    entry["_build_s"] = time.monotonic() - started
    print(f"OpenNN CPU image built in {entry['_build_s']:.0f} s")
    return entry


def test_image_is_recorded_and_runs_the_engine(built: dict) -> None:
    assert built["image"] == "bench/opennn:latest" and built["framework"] == "OpenNN"
    assert built["framework_version"].startswith("5ffbaa62") and built["image_user"] == "10001"
    inside = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", "bench/opennn:latest",
                             "/opt/opennn/build-info.txt"], capture_output=True, text=True, check=True, timeout=120).stdout
    assert "variant cpu" in inside


def test_a_corrupt_archive_stops_the_image_build_in_one_line(env: dict[str, str], tmp_path: Path) -> None:
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    for archive in Path(env["BENCH_OPENNN_VENDOR"]).glob("*.tar.gz"):
        (vendor / archive.name).write_bytes(archive.read_bytes()[:1000])  # truncated
    proc = bench("image", "build", "opennn", "--base", CXX_BASE, "-q", env={**env, "BENCH_OPENNN_VENDOR": str(vendor)}, timeout=1200)
    assert proc.returncode == 2
    assert "sha256" in proc.stderr.strip().splitlines()[-1] and "Traceback" not in proc.stderr


def test_seed_smoke_in_docker(built: dict, env: dict[str, str], tmp_path: Path) -> None:
    proc = bench("scenario", "run", "scenarios/opennn_seed.yaml", "--smoke", "--engines", "opennn", "--runtime", "docker",
                 "--out", str(tmp_path), "--json", env=env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    assert summary["counts"] == {"ok": 1}
    record = json.loads(Path(glob.glob(os.path.join(summary["artifact"], "runs", "*", "run.json"))[0]).read_text())
    assert record["status"] == "ok" and record["parity"]["ok"] and record["runtime"]["name"] == "docker"
