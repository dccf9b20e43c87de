"""The Docker daemon as bench sees it: connecting, reachability, GPU support, local images, and
what every container bench creates carries (its labels, the least-privilege baseline).

Shared by the image builds (:mod:`orchestrator.imagebuild`) and the docker runtime
(:mod:`orchestrator.runtimes.docker`); it imports neither. Everything here goes through the
Docker SDK (``docker`` package). Nothing is ever pulled implicitly: a missing image is
reported, never fetched behind the user's back.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from typing import Any, TypedDict

from orchestrator.errors import BadInput

CONNECT_TIMEOUT_S = 10
# Every container bench creates carries this label (value: the run id, or image-probe:<engine>).
RUN_LABEL = "bench.run"
ENGINE_LABEL = "bench.engine"


class HardenedHostConfig(TypedDict):
    """The least-privilege part of every bench container's host config (``create_host_config`` keywords)."""

    network_mode: str
    cap_drop: list[str]
    security_opt: list[str]
    privileged: bool


def hardened_host_config() -> HardenedHostConfig:
    """The least-privilege part of every bench container's host config."""
    return {"network_mode": "none", "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "privileged": False}


def _reason(exc: BaseException) -> str:
    """A short reason for a failed connection (the SDK nests the interesting part deeply)."""
    seen: set[int] = set()
    queue: list[BaseException] = [exc]
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, FileNotFoundError):
            return "no Docker socket (is dockerd running?)"
        if isinstance(current, PermissionError):
            return "permission denied on the Docker socket (add yourself to the 'docker' group)"
        if isinstance(current, ConnectionRefusedError):
            return "connection refused (is dockerd running?)"
        queue.extend(e for e in (current.__cause__, current.__context__, *current.args) if isinstance(e, BaseException))
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    return text[:200]


def daemon_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def connect(timeout: int = CONNECT_TIMEOUT_S) -> Any:
    """A ``docker.DockerClient`` whose daemon answered a ping; BadInput (one line) when it does not."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency of bench
        raise BadInput("the 'docker' Python package is not installed (pip install docker)") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        raise BadInput(f"Docker daemon unreachable at {daemon_address()}: {_reason(exc)}; start it, or use --runtime local") from None
    return client


@dataclass(frozen=True)
class DaemonStatus:
    """The Docker daemon as ``bench env`` reports it: reachable (its version, address, runtimes and GPU
    support) or not (``reason``)."""

    reachable: bool
    reason: str | None = None
    version: str | None = None
    api_version: str | None = None
    address: str | None = None
    runtimes: tuple[str, ...] = ()
    gpu: bool = False
    gpu_via: str | None = None

    def __post_init__(self) -> None:
        if self.reachable == (self.reason is not None):
            raise ValueError("a daemon is reachable, or not with a reason")
        if not self.reachable and (self.version or self.api_version or self.address or self.runtimes or self.gpu or self.gpu_via):
            raise ValueError("an unreachable daemon has no version, address, runtimes or GPU support")

    def to_json(self) -> dict[str, str | bool | list[str] | None]:
        if not self.reachable:
            return {"reachable": False, "reason": self.reason}
        return {"reachable": True, "version": self.version, "api_version": self.api_version, "address": self.address,
                "runtimes": list(self.runtimes), "gpu": self.gpu, "gpu_via": self.gpu_via}


def daemon_status() -> DaemonStatus:
    """Whether the daemon answers, and what it says of itself."""
    try:
        client = connect()
    except BadInput as exc:
        return DaemonStatus(False, str(exc))
    try:
        info = client.info()
        version = client.version()
    except Exception as exc:
        return DaemonStatus(False, _reason(exc))
    finally:
        client.close()
    support = gpu_support(info, is_local_daemon())
    return DaemonStatus(True, None, version.get("Version"), version.get("ApiVersion"), daemon_address(),
                        tuple(sorted(info.get("Runtimes") or {})), support.available, support.how)


def is_local_daemon() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


@dataclass(frozen=True)
class GpuSupport:
    """How the daemon can hand GPUs to containers: ``mode`` nvidia (device requests), cdi, or None."""

    mode: str | None
    how: str

    @property
    def available(self) -> bool:
        return self.mode is not None


NO_GPU_SUPPORT = "the Docker daemon has no NVIDIA runtime or CDI device"
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")


def gpu_support(info: dict[str, Any], local: bool = True) -> GpuSupport:
    """Read GPU support from ``docker info`` (and, for a local daemon, the NVIDIA hook / CDI specs)."""
    runtimes = info.get("Runtimes") or {}
    if "nvidia" in runtimes:
        return GpuSupport("nvidia", "nvidia runtime")
    for device in info.get("DiscoveredDevices") or []:
        ident = str(device.get("ID", ""))
        if ident.startswith("nvidia.com/gpu"):
            return GpuSupport("cdi", f"CDI device {ident}")
    if local:
        if shutil.which("nvidia-container-runtime-hook"):
            return GpuSupport("nvidia", "nvidia-container-runtime-hook")
        for folder in info.get("CDISpecDirs") or CDI_SPEC_DIRS:
            if glob.glob(os.path.join(folder, "nvidia*.yaml")) or glob.glob(os.path.join(folder, "nvidia*.json")):
                return GpuSupport("cdi", f"CDI spec in {folder}")
    return GpuSupport(None, NO_GPU_SUPPORT)


def find_image(client: Any, ref: str) -> Any | None:
    """The local image ``ref`` (tag, id or name@digest), or None. Never pulls."""
    import docker

    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        if getattr(exc, "status_code", None) == 404:
            return None
        raise

