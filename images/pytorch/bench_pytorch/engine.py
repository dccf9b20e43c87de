"""The PyTorch engine adapter. torch is imported inside the methods, so setup time covers it."""

from __future__ import annotations

from bench_engine.api import Engine, Workload
from bench_engine.contract import RunSpec
from bench_engine.data import Dataset
from bench_engine.report import EnvironmentFacts


class PyTorchEngine(Engine):
    """ResNet training and inference with PyTorch: eager baseline, compiled and graphed optimized path;
    data parallel over several devices as one DDP process per device."""

    name = "pytorch"
    framework = "PyTorch"

    def processes(self, spec: RunSpec) -> int:
        """One process per device (DistributedDataParallel); bench_engine.launch starts them."""
        return spec.parity.devices

    def environment(self, spec: RunSpec) -> EnvironmentFacts:
        from bench_pytorch.environment import environment_facts

        return environment_facts(spec)

    def prepare(self, spec: RunSpec, data: Dataset) -> Workload:
        from bench_pytorch.environment import run_device
        from bench_pytorch.workload import build_workload

        return build_workload(spec, data, run_device(spec))

    def is_out_of_memory(self, exc: BaseException) -> bool:
        import torch

        return isinstance(exc, torch.cuda.OutOfMemoryError) or super().is_out_of_memory(exc)
