"""Data-parallel PyTorch: one process per device, DistributedDataParallel, a shard of every batch.

``bench_engine.launch`` starts one worker per device with torchrun's variables; each worker
joins the process group here (NCCL with one GPU per rank, gloo on CPU), trains the same model
(same seed; DDP also broadcasts rank 0's parameters and buffers) on its share of every global
batch (bench_engine.shards) and lets DDP average the gradients (bucketed all-reduce overlapped
with backward). BatchNorm statistics stay per device, as in NVIDIA's reference training.

CUDA graphs of a DDP step follow PyTorch's recipe for NCCL >= 2.9.6 (notes/cuda, "Usage with
DistributedDataParallel"): the NCCL async error handling is off before the process group
exists, DDP is constructed on the side stream that also runs the warmup and the capture, and
at least 11 eager DDP iterations (options.DDP_GRAPH_WARMUP) run before capture. The capture must fall
inside the run's warmup steps, so with fewer warmup steps the automatic choice is eager.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
from torch import nn

from bench_engine import progress
from bench_engine.api import UnsupportedError
from bench_engine.contract import RunSpec
from bench_engine.launch import WorkerInfo, worker_info
from bench_engine.result import log

DEFAULT_TIMEOUT_S = 900.0  # collectives and rendezvous; the launcher stops a run with a dead worker sooner


@dataclass
class DistContext:
    """This worker's rank, world and backend."""

    worker: WorkerInfo
    backend: str
    device: torch.device

    @property
    def rank(self) -> int:
        return self.worker.rank

    @property
    def world_size(self) -> int:
        return self.worker.world_size

    def layout(self) -> str:
        return (f"DistributedDataParallel, {self.world_size} processes (one per device), backend {self.backend}, "
                f"torchrun-style env rendezvous {self.worker.master_addr}:{self.worker.master_port}")


def require_worker(spec: RunSpec) -> WorkerInfo | None:
    """The launched worker for a spec with devices > 1 (None for one device)."""
    devices = spec.parity.devices
    worker = worker_info()
    if devices == 1:
        return None
    if worker is None:
        raise UnsupportedError(f"{devices} devices need one process per device: run the engine entrypoint, which launches them")
    if worker.world_size != devices:
        raise UnsupportedError(f"worker world size {worker.world_size} differs from the spec's {devices} devices")
    return worker


def worker_device(requested: str, worker: WorkerInfo) -> torch.device:
    """``cuda:LOCAL_RANK`` (every rank sees every GPU, as under torchrun) or the CPU."""
    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise UnsupportedError("device 'cuda' requested but torch sees no CUDA GPU")
    if requested == "cuda" or (requested == "auto" and available):
        count = torch.cuda.device_count()
        if count < worker.local_world_size:
            raise UnsupportedError(f"{worker.local_world_size} devices requested but torch sees {count} CUDA GPU(s)")
        device = torch.device("cuda", worker.local_rank)
        torch.cuda.set_device(device)  # first CUDA call of the rank: no context of every rank on GPU 0
        return device
    return torch.device("cpu")


def cpu_threads(worker: WorkerInfo) -> int:
    """Intra-op threads of a CPU rank: the cores shared out, so ranks do not oversubscribe them."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, worker.local_world_size))


def init_process_group(worker: WorkerInfo, device: torch.device, graphs: bool) -> DistContext:
    """Join the process group of the run (before any collective; CUDA graphs need it set up first)."""
    import torch.distributed as dist

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
        if graphs:  # PyTorch's DDP + CUDA graph recipe: no async error handling around captured NCCL work
            os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    else:
        torch.set_num_threads(cpu_threads(worker))
    backend = "nccl" if cuda else "gloo"
    timeout = timedelta(seconds=float(os.environ.get("BENCH_DIST_TIMEOUT_S", DEFAULT_TIMEOUT_S)))
    progress.phase("rendezvous")  # a rank that never gets past it is named by the launcher's stall watch
    started = time.perf_counter()
    # on CUDA, an eager NCCL communicator bound to this rank's GPU (device_id)
    dist.init_process_group(backend=backend, init_method="env://", rank=worker.rank, world_size=worker.world_size, timeout=timeout,
                            device_id=device if cuda else None)
    if cuda:  # the eagerly created communicator is usable: one tiny all-reduce proves it before the model is built
        probe = torch.ones(1, device=device)
        dist.all_reduce(probe)
        torch.cuda.synchronize(device)
    log(f"rank {worker.rank}: process group ready ({backend}) in {time.perf_counter() - started:.1f}s")
    progress.phase("setup")
    return DistContext(worker=worker, backend=backend, device=device)


def wrap_ddp(model: nn.Module, ctx: DistContext, stream: torch.cuda.Stream | None) -> nn.Module:
    """DDP around ``model`` (built on ``stream`` when the step will be captured in a CUDA graph)."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    if stream is not None:
        with torch.cuda.stream(stream):
            wrapped = DistributedDataParallel(model, device_ids=ids)
        torch.cuda.current_stream().wait_stream(stream)
        return wrapped
    return DistributedDataParallel(model, device_ids=ids)


def mean_over_ranks(value: torch.Tensor) -> torch.Tensor:
    """The mean of a scalar over every rank (the loss of the global batch; outside the timed windows)."""
    import torch.distributed as dist

    total = value.detach().float().clone()
    dist.all_reduce(total)
    return total / dist.get_world_size()


TEARDOWN_TIMEOUT_S = 60.0  # leaving the process group; a hung NCCL teardown is abandoned after this


def shutdown(timeout_s: float = TEARDOWN_TIMEOUT_S) -> bool:
    """Leave the process group (all ranks, at the end of a run); False when it did not finish in ``timeout_s``.

    ``destroy_process_group`` runs in a daemon thread and is waited for at most ``timeout_s``, so a
    teardown that never returns (seen on 2 H200s while a captured CUDA graph still held the NCCL
    work of a DDP step) cannot hold back a result that was already measured.
    """
    import threading

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return True
    done = threading.Event()

    def destroy() -> None:
        try:
            dist.destroy_process_group()
        finally:
            done.set()

    threading.Thread(target=destroy, name="bench-process-group-teardown", daemon=True).start()
    return done.wait(timeout_s)
