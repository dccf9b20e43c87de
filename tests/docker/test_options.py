"""The container options of a run, built without a daemon: CPU and GPU, least privilege, mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.docker_client import NO_GPU_SUPPORT, DaemonStatus, GpuSupport, gpu_support
from orchestrator.errors import BadInput
from orchestrator.runtimes.base import RunPaths
from orchestrator.runtimes.docker import DockerRuntime
from orchestrator.runtimes.docker_gpus import GpuAccess, parse_visible, plan_gpus
from orchestrator.runtimes.docker_options import DATASET_MOUNT, RUN_MOUNT, container_options
from orchestrator.runtimes.docker_security import applied_options

NVIDIA = GpuSupport("nvidia", "nvidia runtime")
CDI = GpuSupport("cdi", "CDI device nvidia.com/gpu=all")
NONE = GpuSupport(None, NO_GPU_SUPPORT)


def _options(tmp_path: Path, gpus: GpuAccess, **extra) -> dict:
    return container_options(image="sha256:" + "a" * 64, engine="pytorch", run_id="pytorch-fp32-optimized-b32-d1-r1",
                             run_dir=tmp_path / "run", dataset_dir=tmp_path / "data", spec_name="spec.json",
                             result_name="result.json", user="1000:1000", gpus=gpus, **extra)


def _assert_least_privilege(host: dict) -> None:
    assert host["network_mode"] == "none"
    assert host["cap_drop"] == ["ALL"]
    assert host["security_opt"] == ["no-new-privileges:true"]
    assert host["privileged"] is False
    assert host["ipc_mode"] == "private"  # not the host's IPC namespace
    assert "cap_add" not in host and "pid_mode" not in host


def test_cpu_run_options(tmp_path: Path) -> None:
    opts = _options(tmp_path, plan_gpus("cpu", None, 8, NVIDIA))
    create, host = opts["create"], opts["host_config"]
    _assert_least_privilege(host)
    assert host["device_requests"] == []
    assert create["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"  # no GPU even under a default nvidia runtime
    assert create["environment"]["NCCL_NVLS_ENABLE"] == "0"
    assert create["user"] == "1000:1000"
    assert create["command"] == ["--spec", f"{RUN_MOUNT}/spec.json", "--result", f"{RUN_MOUNT}/result.json"]
    assert create["labels"] == {"bench.run": "pytorch-fp32-optimized-b32-d1-r1", "bench.engine": "pytorch"}
    assert create["name"].startswith("bench-pytorch-fp32-optimized-b32-d1-r1-")
    assert host["binds"] == {str((tmp_path / "data").resolve()): {"bind": DATASET_MOUNT, "mode": "ro"},
                             str((tmp_path / "run").resolve()): {"bind": RUN_MOUNT, "mode": "rw"},
                             "bench-compile-cache": {"bind": "/bench/cache", "mode": "rw"}}
    assert host["shm_size"] == "8g"
    # read-only root filesystem, scratch in a tmpfs, caches on the volume, an init, limits
    assert host["read_only"] is True and host["init"] is True
    assert host["tmpfs"] == {"/tmp": "rw,exec,nosuid,nodev,size=8g,mode=1777"}
    assert create["environment"]["TORCHINDUCTOR_CACHE_DIR"] == "/bench/cache/inductor"
    assert host["pids_limit"] == 8192 and "mem_limit" not in host and "nano_cpus" not in host
    assert {u["name"]: (u["soft"], u["hard"]) for u in host["ulimits"]} == {"memlock": (-1, -1), "stack": (67108864, 67108864)}


def test_gpu_run_options_all_gpus(tmp_path: Path) -> None:
    opts = _options(tmp_path, plan_gpus("cuda", None, 8, NVIDIA), shm_size="16g")
    host, env = opts["host_config"], opts["create"]["environment"]
    _assert_least_privilege(host)
    assert host["device_requests"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert "NVIDIA_VISIBLE_DEVICES" not in env  # the device request decides
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert host["shm_size"] == "16g"


def test_gpu_run_options_selected_indices(tmp_path: Path) -> None:
    gpus = plan_gpus("auto", "1,3", 8, NVIDIA)
    assert gpus.devices == ("1", "3")
    host = _options(tmp_path, gpus)["host_config"]
    assert host["device_requests"] == [{"driver": "nvidia", "count": 0, "device_ids": ["1", "3"], "capabilities": [["gpu"]]}]


def test_gpu_run_options_cdi(tmp_path: Path) -> None:
    assert _options(tmp_path, plan_gpus("cuda", None, 2, CDI))["host_config"]["device_requests"] == [
        {"driver": "cdi", "device_ids": ["nvidia.com/gpu=all"]}]
    assert _options(tmp_path, plan_gpus("cuda", [0, 1], 2, CDI))["host_config"]["device_requests"] == [
        {"driver": "cdi", "device_ids": ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]}]


def test_extra_env_kept(tmp_path: Path) -> None:
    env = _options(tmp_path, GpuAccess(), extra_env={"FOO": "1"})["create"]["environment"]
    assert env["FOO"] == "1" and env["HOME"] == "/tmp" and env["PYTHONUNBUFFERED"] == "1"


@pytest.mark.parametrize(("device", "visible", "host", "support", "mode"), [
    ("auto", None, 2, NVIDIA, "nvidia"),
    ("auto", None, 0, NVIDIA, "none"),     # no GPU on the host
    ("auto", None, 2, NONE, "none"),       # GPUs, but the daemon cannot hand them out: CPU, saying why
    ("cpu", "0", 2, NVIDIA, "none"),
    ("cuda", None, 2, CDI, "cdi"),
])
def test_plan_gpus(device, visible, host, support, mode) -> None:
    assert plan_gpus(device, visible, host, support).mode == mode


def test_plan_gpus_says_why_none() -> None:
    assert NO_GPU_SUPPORT in plan_gpus("auto", None, 2, NONE).label()
    assert "no GPU on this host" in plan_gpus("auto", None, 0, NONE).label()
    assert plan_gpus("cuda", "0,1", 2, NVIDIA).label() == "0,1 via nvidia"


@pytest.mark.parametrize("visible", [None, "0,1"])
def test_gpus_requested_without_nvidia_runtime_is_bad_input(visible) -> None:
    device = "cuda" if visible is None else "auto"
    with pytest.raises(BadInput, match="no NVIDIA runtime or CDI device"):
        plan_gpus(device, visible, 2, NONE)


def test_parse_visible() -> None:
    assert parse_visible("0, 2") == ("0", "2")
    assert parse_visible([1]) == ("1",)
    assert parse_visible("all") == () and parse_visible("") == ()
    assert parse_visible("GPU-1234abcd-0000") == ("GPU-1234abcd-0000",)
    with pytest.raises(BadInput, match="visible_devices"):
        parse_visible("0;rm -rf")


def test_gpu_support_from_daemon_info(tmp_path: Path) -> None:
    assert gpu_support({"Runtimes": {"runc": {}, "nvidia": {}}}, local=False).mode == "nvidia"
    assert gpu_support({"Runtimes": {"runc": {}}, "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"}]}, local=False).mode == "cdi"
    assert gpu_support({"Runtimes": {"runc": {}}}, local=False).mode is None
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    (spec_dir / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    assert gpu_support({"Runtimes": {}, "CDISpecDirs": [str(spec_dir)]}, local=True).mode in ("cdi", "nvidia")


def test_daemon_status_documents_and_checks() -> None:
    up = DaemonStatus(True, None, "28.0", "1.48", "unix:///var/run/docker.sock", ("nvidia", "runc"), True, "nvidia runtime")
    assert list(up.to_json()) == ["reachable", "version", "api_version", "address", "runtimes", "gpu", "gpu_via"]
    assert up.to_json()["runtimes"] == ["nvidia", "runc"]
    assert DaemonStatus(False, "connection refused").to_json() == {"reachable": False, "reason": "connection refused"}
    with pytest.raises(ValueError, match="with a reason"):
        DaemonStatus(False)
    with pytest.raises(ValueError, match="with a reason"):
        DaemonStatus(True, "but why")
    with pytest.raises(ValueError, match="no version"):
        DaemonStatus(False, "down", version="28.0")


def test_paths_inside_the_container(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    paths = RunPaths(run, run / "spec.json", run / "result.json", run / "engine.log", tmp_path / "data")
    runtime = DockerRuntime()
    assert runtime.dataset_path(paths) == DATASET_MOUNT
    assert runtime.spec_paths(paths) == (f"{RUN_MOUNT}/spec.json", f"{RUN_MOUNT}/result.json")


def test_applied_options_from_inspect() -> None:
    attrs = {
        "Id": "f" * 64, "Name": "/bench-x",
        "Config": {"User": "1000:1000", "Labels": {"bench.run": "x", "other": "y"}},
        "HostConfig": {"NetworkMode": "none", "Privileged": False, "CapDrop": ["ALL"], "CapAdd": None,
                       "SecurityOpt": ["no-new-privileges:true"], "IpcMode": "private", "ShmSize": 1 << 30,
                       "Ulimits": [{"Name": "stack", "Soft": 1, "Hard": 2}], "DeviceRequests": None, "Binds": ["/a:/b:ro"]},
    }
    applied = applied_options(attrs).to_json()
    assert applied["id"] == "f" * 12 and applied["name"] == "bench-x"
    assert applied["labels"] == {"bench.run": "x"}
    assert applied["ulimits"] == [{"name": "stack", "soft": 1, "hard": 2}]
    assert applied["device_requests"] == [] and applied["binds"] == ["/a:/b:ro"]


def test_shm_size_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.runtimes.docker_settings import docker_settings

    def shm_size(given: dict) -> str:
        return docker_settings(given).shm_size

    monkeypatch.delenv("BENCH_DOCKER_SHM_SIZE", raising=False)
    assert shm_size({}) == "8g"
    monkeypatch.setenv("BENCH_DOCKER_SHM_SIZE", "2g")
    assert shm_size({}) == "2g"
    assert shm_size({"docker": {"shm_size": "16g"}, "shm_size": "4g"}) == "16g"
    with pytest.raises(BadInput, match=r"docker\.shm_size"):
        shm_size({"shm_size": "lots"})


def test_limits_from_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from orchestrator.runtimes import docker_limits as runtime
    from orchestrator.runtimes.docker_settings import docker_settings

    monkeypatch.setattr(runtime, "host_memory_bytes", lambda: 100 << 30)
    default = runtime.limits(docker_settings({}))
    assert default.pids == 8192 and default.memory == f"{int((100 << 30) * 0.9) // (1 << 20)}m" and default.cpus is None
    given = runtime.limits(docker_settings({"docker": {"pids_limit": 512, "mem_limit": "16g", "cpus": 2.5, "tmp_size": "1g"}}))
    host = _options(tmp_path, GpuAccess(), limits=given, cache_volume=None)["host_config"]
    assert (host["pids_limit"], host["mem_limit"], host["memswap_limit"], host["nano_cpus"]) == (512, "16g", "16g", 2_500_000_000)
    assert host["tmpfs"]["/tmp"].endswith("size=1g,mode=1777") and all(b["bind"] != "/bench/cache" for b in host["binds"].values())
    assert runtime.limits(docker_settings({"docker": {"mem_limit": "none"}})).memory is None
    for bad, field in (({"pids_limit": 10}, "pids_limit"), ({"pids_limit": True}, "pids_limit"), ({"mem_limit": "lots"}, "mem_limit"),
                       ({"cpus": 0}, "cpus"), ({"tmp_size": "1 g"}, "tmp_size")):
        with pytest.raises(BadInput, match=rf"runtime\.docker\.{field}"):
            runtime.limits(docker_settings({"docker": bad}))


def test_image_user_is_never_root() -> None:
    from orchestrator.runtimes.docker_ownership import image_user

    class Image:
        def __init__(self, user):
            self.attrs = {"Config": {"User": user}}

    assert image_user(Image("10001:10001")) == "10001:10001"
    assert image_user(Image("10001")) == "10001:10001"
    for root_or_unknown in ("", None, "0", "0:0", "root", "10001:0", "bench"):
        assert image_user(Image(root_or_unknown)) == "65534:65534"
