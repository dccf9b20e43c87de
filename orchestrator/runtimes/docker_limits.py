"""Resource limits of the docker runtime: pids, memory, CPUs, /tmp and /dev/shm sizes, ulimits."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.runtimes.docker_settings import (  # noqa: F401  (importable from here as before)
    DEFAULT_PIDS_LIMIT,
    DEFAULT_SHM_SIZE,
    DEFAULT_TMP_SIZE,
    SHM_ENV,
    SIZE,
    DockerSettings,
    docker_settings,
)

# NVIDIA's recommended settings for its framework images: unlimited memlock, a 64 MiB stack.
ULIMITS = ({"name": "memlock", "soft": -1, "hard": -1}, {"name": "stack", "soft": 67108864, "hard": 67108864})
# runc's "error setting rlimit type N": the RLIMIT_* numbers of the ulimits bench sets.
_RLIMIT_NAMES = {8: "memlock", 3: "stack"}


@dataclass(frozen=True)
class Limits:
    """Resource limits of a run's container (``runtime.docker`` settings)."""

    pids: int = DEFAULT_PIDS_LIMIT
    memory: str | None = None  # None: no limit
    cpus: float | None = None  # None: all the host's CPUs
    tmp_size: str = DEFAULT_TMP_SIZE

    def host_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"pids_limit": self.pids}
        if self.memory:
            config.update(mem_limit=self.memory, memswap_limit=self.memory)  # no swap on top
        if self.cpus:
            config["nano_cpus"] = int(self.cpus * 1e9)
        return config


def host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def limits(cfg: DockerSettings) -> Limits:
    """The container's limits from ``runtime.docker.{pids_limit, mem_limit, cpus, tmp_size}``; memory by default 90% of the host's."""
    memory = cfg.mem_limit
    if memory is None:
        total = host_memory_bytes()
        memory = f"{int(total * 0.9) // (1 << 20)}m" if total else None
    elif memory == "none":
        memory = None
    return Limits(cfg.pids_limit, memory, cfg.cpus, cfg.tmp_size)


def unsettable_ulimit(exc: Exception, ulimits: list[dict[str, Any]]) -> str | None:
    """The ulimit name a start failure blames on rlimit permissions, when bench set it."""
    match = re.search(r"error setting rlimit type (\d+): operation not permitted", str(getattr(exc, "explanation", None) or exc))
    name = _RLIMIT_NAMES.get(int(match.group(1))) if match else None
    return name if name and any(u["name"] == name for u in ulimits) else None
