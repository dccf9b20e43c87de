"""Security options of a run's container: least privilege on top of bench's baseline, and the
options as ``docker inspect`` reports them (for the run record)."""

from __future__ import annotations

from typing import Any

from orchestrator.docker_client import hardened_host_config

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


def applied_options(attrs: dict[str, Any]) -> dict[str, Any]:
    """The options that matter, as ``docker inspect`` reports them for a created container."""
    host = attrs.get("HostConfig") or {}
    config = attrs.get("Config") or {}
    return {
        "id": attrs.get("Id", "")[:12],
        "name": str(attrs.get("Name", "")).lstrip("/"),
        "user": config.get("User"),
        "network_mode": host.get("NetworkMode"),
        "privileged": host.get("Privileged"),
        "cap_drop": host.get("CapDrop"),
        "cap_add": host.get("CapAdd"),
        "security_opt": host.get("SecurityOpt"),
        "ipc_mode": host.get("IpcMode"),
        "shm_size": host.get("ShmSize"),
        "readonly_rootfs": host.get("ReadonlyRootfs"),
        "init": host.get("Init"),
        "pids_limit": host.get("PidsLimit"),
        "memory": host.get("Memory"),
        "nano_cpus": host.get("NanoCpus"),
        "tmpfs": host.get("Tmpfs"),
        "ulimits": [{"name": u.get("Name"), "soft": u.get("Soft"), "hard": u.get("Hard")} for u in host.get("Ulimits") or []],
        "device_requests": [{"driver": d.get("Driver"), "count": d.get("Count"), "device_ids": d.get("DeviceIDs"), "capabilities": d.get("Capabilities")}
                            for d in host.get("DeviceRequests") or []],
        "binds": host.get("Binds"),
        "labels": {k: v for k, v in (config.get("Labels") or {}).items() if k.startswith("bench.")},
    }
