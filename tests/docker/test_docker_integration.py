"""End to end with the real Docker daemon: build the PyTorch engine image from the production
Dockerfile on the local CPU base (.ci/docker-setup.sh), run the smoke scenario under the docker
runtime, and check the artifact, the recorded image, the applied security options, the timeout
and Ctrl-C paths, and that no bench container is ever left behind."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import REPO

pytestmark = pytest.mark.docker
ROOTFS = "bench-test-rootfs:bookworm-minbase"  # .ci/docker-setup.sh's base without torch
LONG = ["--set", "workload.epochs=200"]  # ~1200 steps: far longer than the timeout / the Ctrl-C delay below
SMOKE = ["scenario", "run", "scenarios/cifar_resnet50.yaml", "--smoke", "--engines", "pytorch", "--precisions", "fp32", "--runtime", "docker"]


def bench(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout)


def docker_json(*args: str) -> Any:
    return json.loads(subprocess.run(["docker", *args], capture_output=True, text=True, check=True, timeout=60).stdout)


def leftovers() -> list[str]:
    proc = subprocess.run(["docker", "ps", "-a", "--filter", "label=bench.run", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True, timeout=60)
    return proc.stdout.split()


def only_run(out: Path) -> tuple[Path, dict[str, Any]]:
    artifacts = glob.glob(str(out / "cifar_resnet50" / "*"))
    assert len(artifacts) == 1, artifacts
    records = glob.glob(os.path.join(artifacts[0], "runs", "*", "run.json"))
    assert len(records) == 1, records
    return Path(artifacts[0]), json.loads(Path(records[0]).read_text())


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("docker-it")
    return {**os.environ, "BENCH_DATA_DIR": str(root / "data"), "BENCH_IMAGES_LOCK": str(root / "images.lock.json"), "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def built(test_base: str, env: dict[str, str]) -> dict[str, Any]:
    """`bench image build pytorch --base <local CPU base>` with the production Dockerfile."""
    assert not leftovers(), "bench containers left over from an earlier session"
    started = time.monotonic()
    proc = bench("image", "build", "pytorch", "--base", test_base, "--json", "-q", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    entry = json.loads(proc.stdout)
    entry["_build_s"] = time.monotonic() - started
    return entry


def test_image_build_records_versions_labels_and_lock(built: dict[str, Any], test_base: str, env: dict[str, str]) -> None:
    assert built["image_id"].startswith("sha256:") and built["image"] == "bench/pytorch:latest"
    inside = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3", test_base, "-c",
                             "import platform, torch; print(torch.__version__, torch.version.cuda, platform.python_version())"],
                            capture_output=True, text=True, check=True, timeout=120).stdout.split()
    assert built["framework"] == "PyTorch" and [built["framework_version"], str(built["cuda"]), built["python"]] == inside
    assert built["os"] and built["image_user"] == "10001"  # the image's own user is not root
    base_id = docker_json("image", "inspect", test_base)[0]["Id"]
    assert built["base"] == {"ref": test_base, "digest": None, "image_id": base_id, "pinned": False}
    assert json.loads(Path(env["BENCH_IMAGES_LOCK"]).read_text())["images"]["pytorch"]["image_id"] == built["image_id"]
    image = docker_json("image", "inspect", "bench/pytorch:latest")[0]
    assert image["Id"] == built["image_id"]
    config = image["Config"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.base.name"] == test_base and labels["io.bench.base.image-id"] == base_id
    assert labels["org.opencontainers.image.version"] == built["engine_version"]
    assert labels["org.opencontainers.image.revision"] == built["source_revision"] != "unknown"
    assert config["User"] == "10001:10001" and config["Entrypoint"] == ["python3", "-m", "bench_pytorch"]
    assert "PYTHONPATH=/opt/bench/lib" in config["Env"] and "NCCL_NVLS_ENABLE=0" in config["Env"]
    assert not leftovers()  # the version probe's container is gone too


def test_image_list_and_inspect(built: dict[str, Any], env: dict[str, str]) -> None:
    rows = {r["engine"]: r for r in json.loads(bench("image", "list", "--json", env=env).stdout)}
    assert rows["pytorch"]["status"] == "built" and rows["pytorch"]["local_image_id"] == built["image_id"]
    facts = json.loads(bench("image", "inspect", "pytorch", "--json", env=env).stdout)
    assert facts["lock"]["image_id"] == facts["local"]["id"] == built["image_id"] and facts["metadata_consistent"]


def test_smoke_scenario_runs_in_docker(built: dict[str, Any], env: dict[str, str], tmp_path: Path) -> None:
    started = time.monotonic()
    proc = bench(*SMOKE, "--out", str(tmp_path / "out"), env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    artifact, record = only_run(tmp_path / "out")
    validated = bench("results", "validate", str(artifact), env=env)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert record["status"] == "ok" and record["throughput"] > 0
    runtime = record["runtime"]
    assert runtime["name"] == "docker" and runtime["image"] == "bench/pytorch:latest"
    assert runtime["image_id"] == built["image_id"]  # exactly the image that was built and locked
    assert runtime["base_digest"] == built["base"]["image_id"] and runtime["base"] == built["base"]["ref"]
    container = runtime["container"]  # as `docker inspect` reported it before the container was removed
    assert container["network_mode"] == "none" and container["privileged"] is False
    assert container["cap_drop"] == ["ALL"] and not container["cap_add"]
    assert container["security_opt"] == ["no-new-privileges:true"] and container["ipc_mode"] == "private"
    # never root: the image's user when bench is root, else the invoking uid:gid
    assert container["user"] == ("10001:10001" if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}") and container["shm_size"] >= 1 << 30
    assert container["readonly_rootfs"] is True and container["init"] is True and "/tmp" in container["tmpfs"]
    assert container["pids_limit"] == 8192 and container["memory"] > 0
    assert any(b.startswith("bench-compile-cache:/bench/cache") for b in container["binds"]) or os.getuid() != 0
    assert any(b.endswith(":/bench/dataset:ro") for b in container["binds"]) and any(b.endswith(":/bench/run:rw") for b in container["binds"])
    assert {"stack"} <= {u["name"] for u in container["ulimits"]} and container["labels"]["bench.run"] == record["run_id"]
    run_dir = artifact / "runs" / record["run_id"]
    assert (run_dir / "result.json").stat().st_uid == os.getuid()
    assert "[bench-engine]" in (run_dir / "engine.log").read_text()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["environment"]["framework_version"] == built["framework_version"]
    assert not leftovers()
    print(f"\nimage build {built['_build_s']:.1f} s, smoke run {time.monotonic() - started:.1f} s")


def test_timeout_stops_and_removes_the_container(built: dict[str, Any], env: dict[str, str], tmp_path: Path) -> None:
    proc = bench(*SMOKE, *LONG, "--set", "measurement.timeout_s=5", "--out", str(tmp_path / "out"), env=env)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    _, record = only_run(tmp_path / "out")
    assert record["status"] == "timeout" and "5 s timeout" in record["reason"]
    assert not leftovers()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signal_stops_and_removes_the_container(sig: signal.Signals, built: dict[str, Any], env: dict[str, str], tmp_path: Path) -> None:
    """Ctrl-C and SIGTERM: bench stops and removes the container and records the run interrupted;
    SIGKILL: bench cannot, its watchdog removes the container (and the artifact still validates)."""
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *SMOKE, *LONG, "--out", str(tmp_path / "out")], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not leftovers():
            assert proc.poll() is None and time.monotonic() < deadline, "the run's container never appeared"
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    artifact = next((tmp_path / "out" / "cifar_resnet50").iterdir())
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 60
        while leftovers() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not leftovers(), "the container outlived a SIGKILLed bench"
    else:
        assert proc.returncode == 128 + sig, output[-3000:]
        _, record = only_run(tmp_path / "out")
        assert record["status"] == "interrupted"
        assert not leftovers()
    validated = bench("results", "validate", str(artifact), env=env)
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_a_base_without_the_framework_is_refused_and_keeps_the_tag(built: dict[str, Any], env: dict[str, str]) -> None:
    if subprocess.run(["docker", "image", "inspect", ROOTFS], capture_output=True).returncode != 0:
        pytest.skip(f"{ROOTFS} not present")
    proc = bench("image", "build", "pytorch", "--base", ROOTFS, "-q", env=env)
    assert proc.returncode == 2 and "cannot run the engine" in proc.stderr and "No module named 'torch'" in proc.stderr
    assert docker_json("image", "inspect", "bench/pytorch:latest")[0]["Id"] == built["image_id"]
    assert json.loads(Path(env["BENCH_IMAGES_LOCK"]).read_text())["images"]["pytorch"]["image_id"] == built["image_id"]
    assert not leftovers()
