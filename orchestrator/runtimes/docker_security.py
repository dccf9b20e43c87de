"""Security options of a run's container: least privilege on top of bench's baseline, and the
options as ``docker inspect`` reports them (for the run record)."""

from __future__ import annotations

from typing import Any

from orchestrator.docker_client import hardened_host_config
from orchestrator.runtimes.runtime_facts import ContainerOptions

WORKDIR = "/tmp"  # the container's only writable scratch (a tmpfs); also its working directory


def isolation_host_config(tmp_size: str) -> dict[str, Any]:
    """No network, no capabilities, no new privileges, private IPC, a read-only root with a
    tmpfs at /tmp, and ``docker-init`` as PID 1."""
    return {
        **hardened_host_config(),
        "ipc_mode": "private",
        "read_only": True,
        "tmpfs": {WORKDIR: f"rw,exec,nosuid,nodev,size={tmp_size},mode=1777"},
        "init": True,
    }


def _tuple(value: Any) -> tuple[Any, ...] | None:
    return tuple(value) if isinstance(value, list | tuple) else None


def applied_options(attrs: dict[str, Any]) -> ContainerOptions:
    """The options that matter, read from what ``docker inspect`` reports for a created container."""
    host = attrs.get("HostConfig") or {}
    config = attrs.get("Config") or {}
    requests = tuple((d.get("Driver"), d.get("Count"), _tuple(d.get("DeviceIDs")),
                      tuple(tuple(c) for c in d["Capabilities"]) if isinstance(d.get("Capabilities"), list) else None)
                     for d in host.get("DeviceRequests") or [])
    return ContainerOptions(
        id=attrs.get("Id", "")[:12], name=str(attrs.get("Name", "")).lstrip("/"), user=config.get("User"),
        network_mode=host.get("NetworkMode"), privileged=host.get("Privileged"), cap_drop=_tuple(host.get("CapDrop")),
        cap_add=_tuple(host.get("CapAdd")), security_opt=_tuple(host.get("SecurityOpt")), ipc_mode=host.get("IpcMode"),
        shm_size=host.get("ShmSize"), readonly_rootfs=host.get("ReadonlyRootfs"), init=host.get("Init"),
        pids_limit=host.get("PidsLimit"), memory=host.get("Memory"), nano_cpus=host.get("NanoCpus"),
        tmpfs=tuple((host.get("Tmpfs") or {}).items()) if host.get("Tmpfs") is not None else None,
        ulimits=tuple((u.get("Name"), u.get("Soft"), u.get("Hard")) for u in host.get("Ulimits") or []),
        device_requests=requests, binds=_tuple(host.get("Binds")),
        labels=tuple((k, v) for k, v in (config.get("Labels") or {}).items() if k.startswith("bench.")),
    )
