"""What the engine sees inside its runtime: torch, CUDA, cuDNN, driver, devices."""

from __future__ import annotations

import os
from typing import Any

import torch

from bench_engine.api import UnsupportedError
from bench_engine.contract import RunSpec
from bench_engine.hardware import cpu_name, cudnn_version_text
from bench_engine.nvidia import driver_version
from bench_engine.report import EnvironmentFacts


def resolve_device(requested: str) -> torch.device:
    """``auto`` picks CUDA when a GPU is visible; ``cuda`` without one is unsupported."""
    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise UnsupportedError("device 'cuda' requested but torch sees no CUDA GPU")
    if requested == "cuda" or (requested == "auto" and available):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def run_device(spec: RunSpec) -> torch.device:
    """The device this process computes on: the spec's, or ``cuda:LOCAL_RANK`` in a launched worker."""
    from bench_pytorch.distributed import require_worker, worker_device

    worker = require_worker(spec)
    return resolve_device(spec.device) if worker is None else worker_device(spec.device, worker)


def environment_facts(spec: RunSpec) -> EnvironmentFacts:
    """The environment block of the result (raises UnsupportedError for an impossible device)."""
    from bench_pytorch.distributed import cpu_threads, require_worker

    worker = require_worker(spec)
    device = run_device(spec)
    world = spec.parity.devices
    threads = cpu_threads(worker) if worker is not None and device.type == "cpu" else torch.get_num_threads()
    extra: dict[str, Any] = {"torch_threads": threads}
    if device.type == "cuda":
        count = min(world, torch.cuda.device_count())
        devices = [torch.cuda.get_device_name(i) for i in range(count)]
        major, minor = torch.cuda.get_device_capability(device)
        extra.update(cuda_device_count=torch.cuda.device_count(), compute_capability=f"{major}.{minor}")
    else:
        devices = [cpu_name()] * world  # one CPU worker per device
    if worker is not None:
        extra["distributed"] = {"world_size": worker.world_size, "processes": worker.world_size,
                                "backend": "nccl" if device.type == "cuda" else "gloo",
                                "launcher": "bench_engine.launch (torchrun-style env)",
                                "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE")}
    return EnvironmentFacts(
        framework_version=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=cudnn_version_text(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None,
        driver=driver_version(),
        device_kind=device.type,
        devices=tuple(devices),
        extra=extra,
    )
