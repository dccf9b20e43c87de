"""Facts about the host recorded with every artifact and shown by ``bench env``."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

import orchestrator
from orchestrator.host.gpus import NvmlSnapshot, nvml_snapshot


def host_facts(gpus: NvmlSnapshot | None = None) -> dict[str, Any]:
    """The host block of a record or summary (``gpus``: the snapshot taken before the runs, else a new one)."""
    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "bench_version": orchestrator.__version__,
        "nvml": (gpus if gpus is not None else nvml_snapshot()).to_json(),
    }
