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
from typing import Any

from orchestrator.errors import BadInput

CONNECT_TIMEOUT_S = 10
# Every container bench creates carries this label (value: the run id, or image-probe:<engine>).
RUN_LABEL = "bench.run"
ENGINE_LABEL = "bench.engine"


def hardened_host_config() -> dict[str, Any]:
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


def daemon_status() -> dict[str, Any]:
    """{'reachable': True, 'version', 'api_version', 'gpu', ...} or {'reachable': False, 'reason'}."""
    try:
        client = connect()
    except BadInput as exc:
        return {"reachable": False, "reason": str(exc)}
    try:
        info = client.info()
        version = client.version()
    except Exception as exc:
        return {"reachable": False, "reason": _reason(exc)}
    finally:
        client.close()
    support = gpu_support(info, is_local_daemon())
    return {
        "reachable": True,
        "version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "address": daemon_address(),
        "runtimes": sorted(info.get("Runtimes") or {}),
        "gpu": support.available,
        "gpu_via": support.how,
    }


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

