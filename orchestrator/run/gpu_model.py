"""An artifact's runs compare only on one GPU model: a resume on a host whose GPUs are another model is refused.

The models the artifact's runs ran on are those NVML named in their records (``telemetry.gpu.devices``) or, where
no run recorded one (a search cut before its first run), in its ``summary.json`` (``host.nvml.gpus``, written by
every run or resume that finished or was interrupted); the host's are NVML's now. Like is compared with like (NVML's
names both times), never with the names an engine reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.host.gpus import NvmlSnapshot


def recorded_gpu_models(summary: Mapping[str, Any] | None) -> frozenset[str]:
    """The GPU models an artifact's summary names (none: no summary, NVML unavailable then, or no GPU)."""
    nvml = ((summary or {}).get("host") or {}).get("nvml") or {}
    return frozenset(gpu["name"] for gpu in nvml.get("gpus") or [] if gpu.get("name"))


def host_gpu_models(snapshot: NvmlSnapshot) -> frozenset[str]:
    return frozenset(gpu.name for gpu in snapshot.gpus if gpu.name)


def check_same_gpu_model(where: str, recorded: frozenset[str], snapshot: NvmlSnapshot, device: str) -> None:
    """Refuse (BadInput, exit 2) to add runs made on this host's GPUs to runs made on ``recorded`` models' (none
    recorded, or ``--device cpu``: nothing to compare)."""
    if device == "cpu" or not recorded:
        return
    current = host_gpu_models(snapshot)
    if current == recorded:
        return
    now = ", ".join(sorted(current)) if current else f"no GPU NVML can see ({snapshot.reason or 'NVML reports 0 devices'})"
    raise BadInput(f"{where}: its runs ran on {', '.join(sorted(recorded))}; this host has {now}: runs "
                   "on another GPU model do not compare, so resume it on the model it was made on, or start a new run")
