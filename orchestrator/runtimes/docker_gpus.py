"""GPU planning of the docker runtime: which GPUs a run's container gets, and through what."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orchestrator.docker_client import NO_GPU_SUPPORT, GpuSupport, gpu_support, is_local_daemon
from orchestrator.errors import BadInput
from orchestrator.host.gpus import nvml_snapshot, visible_ids


@dataclass(frozen=True)
class GpuAccess:
    """GPUs handed to a container: ``mode`` none | nvidia (device request) | cdi; no devices = all."""

    mode: str = "none"
    devices: tuple[str, ...] = ()
    why: str = ""

    def label(self) -> str:
        if self.mode == "none":
            return "none" + (f" ({self.why})" if self.why else "")
        return f"{','.join(self.devices) if self.devices else 'all'} via {self.mode}"

    def device_requests(self) -> list[dict[str, Any]]:
        if self.mode == "nvidia":
            if self.devices:
                return [{"driver": "nvidia", "count": 0, "device_ids": list(self.devices), "capabilities": [["gpu"]]}]
            return [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
        if self.mode == "cdi":
            ids = [f"nvidia.com/gpu={d}" for d in self.devices] or ["nvidia.com/gpu=all"]
            return [{"driver": "cdi", "device_ids": ids}]
        return []


def parse_visible(visible: Any) -> tuple[str, ...]:
    """settings['visible_devices'] ('0,2', [0, 2], 'all' or empty) as device ids (empty = all)."""
    ids = visible_ids(visible)
    for ident in ids:
        if not re.fullmatch(r"\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-zA-Z/-]+", ident):
            raise BadInput(f"visible_devices: '{ident}' is not a GPU index or UUID")
    return ids


def plan_gpus(device: str, visible: Any, host_gpus: int, support: GpuSupport) -> GpuAccess:
    """Which GPUs a container gets. Pure: the caller supplies NVML's count and the daemon's support.

    cpu: none. cuda (or explicit visible_devices): GPUs, or BadInput when the daemon cannot
    hand them out. auto: GPUs when the host has some and the daemon can, else none (saying why).
    """
    ids = parse_visible(visible)
    if device == "cpu":
        return GpuAccess("none", why="--device cpu")
    requested = device == "cuda" or bool(ids)
    if not support.available:
        if requested:
            what = "--device cuda" if device == "cuda" else f"visible_devices {','.join(ids)}"
            raise BadInput(f"{what}: {NO_GPU_SUPPORT} (install the NVIDIA Container Toolkit and restart dockerd, or use --runtime local)")
        return GpuAccess("none", why=NO_GPU_SUPPORT if host_gpus else "no GPU on this host")
    if not requested and host_gpus == 0:
        return GpuAccess("none", why="no GPU on this host")
    return GpuAccess(support.mode or "nvidia", ids, support.how)


def host_gpu_count() -> int:
    return len(nvml_snapshot().gpus)


def gpu_access(client: Any, visible: tuple[str, ...] | None, device: str) -> GpuAccess:
    """The GPUs of a run on ``client``'s daemon (asks the daemon and NVML only when it matters)."""
    ids = parse_visible(visible)
    if device == "cpu":
        return GpuAccess("none", why="--device cpu")
    support = gpu_support(client.info(), is_local_daemon())
    host = host_gpu_count() if device == "auto" and not ids else 0
    return plan_gpus(device, visible, host, support)
