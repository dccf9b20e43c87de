"""Fixtures of the docker tests: a fake Docker SDK client, and the real daemon + local CPU base.

Unit tests use the fake client (no daemon needed). Tests marked ``docker`` use the real daemon
and the base ``.ci/docker-setup.sh`` builds (tag ``$BENCH_TEST_BASE``, default below); they are
skipped when ``docker info`` fails or that base is missing, and fail instead when
BENCH_REQUIRE_DOCKER=1 (as in CI, which runs the setup script first).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TEST_BASE = "bench-test-base:bookworm-torch2.13.0-cpu"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs a running Docker daemon and the local CPU test base (.ci/docker-setup.sh)")


def _unavailable(reason: str) -> None:
    if os.environ.get("BENCH_REQUIRE_DOCKER") == "1":
        pytest.fail(f"BENCH_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_daemon() -> None:
    try:
        proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"docker info failed ({exc})")
    else:
        if proc.returncode != 0:
            _unavailable(f"docker info failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")


@pytest.fixture(scope="session")
def test_base(docker_daemon: None) -> str:
    tag = os.environ.get("BENCH_TEST_BASE", DEFAULT_TEST_BASE)
    proc = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        _unavailable(f"the local CPU test base {tag} is not built (run .ci/docker-setup.sh)")
    return tag


# -- a fake Docker SDK client ------------------------------------------------------------------

class FakeAPIError(Exception):
    def __init__(self, message: str, status_code: int = 500) -> None:
        super().__init__(message)
        self.explanation = message
        self.status_code = status_code


class FakeImage:
    def __init__(self, ident: str, labels: dict[str, str] | None = None, tags: list[str] | None = None) -> None:
        self.id = ident
        self.tags = tags or []
        self.attrs: dict[str, Any] = {"Id": ident, "Config": {"Labels": labels or {}, "User": "10001:10001"}, "RepoDigests": []}
        self.labels = labels or {}


class FakeImages:
    def __init__(self, images: dict[str, FakeImage]) -> None:
        self.images = images

    def get(self, ref: str) -> FakeImage:
        import docker

        for key, image in self.images.items():
            if ref in (key, image.id):
                return image
        raise docker.errors.ImageNotFound(f"No such image: {ref}")


class FakeAPI:
    """Simulates one container: it runs for ``run_polls`` state polls, then exits with ``exit_code``."""

    def __init__(self, run_polls: int = 2, exit_code: int = 0, logs: list[bytes] | None = None,
                 start_errors: list[Exception] | None = None, interrupt_on_poll: int | None = None) -> None:
        self.run_polls, self.exit_code, self.log_chunks = run_polls, exit_code, logs or [b"hello\n", b"part", b"ial\nend"]
        self.start_errors = list(start_errors or [])
        self.interrupt_on_poll = interrupt_on_poll
        self.containers: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.polls = 0
        self.stopped = False

    def create_host_config(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    def create_container(self, image: str, host_config: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, str]:
        cid = f"c{len(self.containers) + 1:063d}"
        self.containers[cid] = {"image": image, "host_config": host_config, **kwargs}
        self.calls.append(("create", cid))
        return {"Id": cid}

    def inspect_container(self, cid: str) -> dict[str, Any]:
        spec = self.containers[cid]
        hc = spec["host_config"] or {}
        running = False
        if ("start", cid) in self.calls and not self.stopped:
            self.polls += 1
            if self.interrupt_on_poll is not None and self.polls == self.interrupt_on_poll:
                raise KeyboardInterrupt
            running = self.polls <= self.run_polls
        return {
            "Id": cid, "Name": "/" + spec["name"],
            "Config": {"User": spec.get("user"), "Labels": spec.get("labels")},
            "HostConfig": {
                "NetworkMode": hc.get("network_mode"), "Privileged": hc.get("privileged"), "CapDrop": hc.get("cap_drop"), "CapAdd": None,
                "SecurityOpt": hc.get("security_opt"), "IpcMode": hc.get("ipc_mode"), "ShmSize": 8 << 30, "ReadonlyRootfs": False,
                "Ulimits": [{"Name": u["name"], "Soft": u["soft"], "Hard": u["hard"]} for u in hc.get("ulimits") or []],
                "DeviceRequests": [{"Driver": d.get("driver"), "Count": d.get("count"), "DeviceIDs": d.get("device_ids"),
                                    "Capabilities": d.get("capabilities")} for d in hc.get("device_requests") or []],
                "Binds": [f"{k}:{v['bind']}:{v['mode']}" for k, v in (hc.get("binds") or {}).items()],
            },
            "State": {"Running": running, "ExitCode": 143 if self.stopped else (None if running else self.exit_code), "OOMKilled": False},
        }

    def start(self, cid: str) -> None:
        if self.start_errors:
            raise self.start_errors.pop(0)
        self.calls.append(("start", cid))

    def logs(self, cid: str, **kwargs: Any):
        return iter(self.log_chunks)

    def stop(self, cid: str, timeout: int = 10) -> None:
        self.calls.append(("stop", cid))
        self.stopped = True

    def remove_container(self, cid: str, force: bool = False, v: bool = False) -> None:
        self.calls.append(("remove", cid))
        self.containers.pop(cid, None)


class FakeClient:
    def __init__(self, api: FakeAPI | None = None, images: dict[str, FakeImage] | None = None, runtimes: dict[str, Any] | None = None,
                 discovered: list[dict[str, str]] | None = None) -> None:
        self.api = api or FakeAPI()
        self.images = FakeImages(images if images is not None else {"bench/pytorch:latest": FakeImage("sha256:" + "a" * 64, {
            "org.opencontainers.image.base.name": "nvcr.io/nvidia/pytorch:26.07-py3@sha256:" + "b" * 64,
            "org.opencontainers.image.base.digest": "sha256:" + "b" * 64,
            "org.opencontainers.image.version": "1.0.0",
            "org.opencontainers.image.revision": "abc123",
        })})
        self.runtimes = runtimes if runtimes is not None else {"runc": {"path": "runc"}}
        self.discovered = discovered
        self.closed = False

    def info(self) -> dict[str, Any]:
        return {"Runtimes": self.runtimes, "DiscoveredDevices": self.discovered, "CDISpecDirs": []}

    def version(self) -> dict[str, str]:
        return {"Version": "28.0.0", "ApiVersion": "1.48"}

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


@pytest.fixture()
def fake_docker(monkeypatch: pytest.MonkeyPatch):
    """Install a FakeClient factory: fake_docker(client) makes connect() return it (no daemon used)."""
    import orchestrator.runtimes.docker as runtime_module
    import orchestrator.runtimes.docker_gpus as gpus_module

    monkeypatch.setattr(gpus_module, "is_local_daemon", lambda: False)  # no host hooks/CDI files
    monkeypatch.setattr(gpus_module, "host_gpu_count", lambda: 0)

    def install(client: FakeClient, host_gpus: int = 0) -> FakeClient:
        monkeypatch.setattr(runtime_module, "connect", lambda *a, **k: client)
        monkeypatch.setattr(gpus_module, "host_gpu_count", lambda: host_gpus)
        return client

    return install
