"""A stand-in for the ``pynvml`` module (nvidia-ml-py): a few fake GPUs with settable readings."""

from __future__ import annotations

import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    memory_total: int = 141 * 2**30
    memory_used: int = 2 * 2**30
    power_mw: int | None = 300_000  # None: not supported
    energy_counter: bool = True
    util: int = 97
    temperature: int = 55
    throttle: int = 0x4  # sw_power_cap
    energy_mj: float = 1_000_000.0
    last: float = field(default_factory=time.monotonic)


def make_module(gpus: list[FakeGpu] | None = None, init_error: Exception | None = None) -> types.ModuleType:
    """A module object with the pynvml functions bench uses; energy grows with power x elapsed time."""
    gpus = [FakeGpu()] if gpus is None else gpus
    lock = threading.Lock()
    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError
    mod.NVML_CLOCK_SM, mod.NVML_CLOCK_MEM, mod.NVML_TEMPERATURE_GPU = 1, 2, 0
    mod.calls = {"init": 0, "shutdown": 0}

    def need(gpu: FakeGpu, value: Any) -> Any:
        if value is None:
            raise NVMLError_NotSupported("Not Supported")
        return value

    def nvmlInit() -> None:
        if init_error is not None:
            raise init_error
        mod.calls["init"] += 1

    def nvmlShutdown() -> None:
        mod.calls["shutdown"] += 1

    def handle(index: int) -> FakeGpu:
        if not 0 <= index < len(gpus):
            raise NVMLError("Invalid Argument")
        return gpus[index]

    def energy(gpu: FakeGpu) -> int:
        if not gpu.energy_counter:
            raise NVMLError_NotSupported("Not Supported")
        with lock:
            now = time.monotonic()
            gpu.energy_mj += (gpu.power_mw or 0) * (now - gpu.last)
            gpu.last = now
            return int(gpu.energy_mj)

    functions = {
        "nvmlInit": nvmlInit,
        "nvmlShutdown": nvmlShutdown,
        "nvmlSystemGetDriverVersion": lambda: "570.86.15",
        "nvmlSystemGetCudaDriverVersion": lambda: 12080,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetName": lambda g: g.name,
        "nvmlDeviceGetUUID": lambda g: g.uuid,
        "nvmlDeviceGetMemoryInfo": lambda g: types.SimpleNamespace(total=g.memory_total, used=g.memory_used, free=g.memory_total - g.memory_used),
        "nvmlDeviceGetPowerManagementLimit": lambda g: 700_000,
        "nvmlDeviceGetEnforcedPowerLimit": lambda g: 700_000,
        "nvmlDeviceGetMaxClockInfo": lambda g, kind: 1980 if kind == 1 else 3201,
        "nvmlDeviceGetClockInfo": lambda g, kind: 1755 if kind == 1 else 3201,
        "nvmlDeviceGetApplicationsClock": lambda g, kind: 1755,
        "nvmlDeviceGetPersistenceMode": lambda g: 1,
        "nvmlDeviceGetMigMode": lambda g: [0, 0],
        "nvmlDeviceGetEccMode": lambda g: [1, 1],
        "nvmlDeviceGetCudaComputeCapability": lambda g: (9, 0),
        "nvmlDeviceGetPciInfo": lambda g: types.SimpleNamespace(busId=b"00000000:19:00.0"),
        "nvmlDeviceGetUtilizationRates": lambda g: types.SimpleNamespace(gpu=g.util, memory=40),
        "nvmlDeviceGetPowerUsage": lambda g: need(g, g.power_mw),
        "nvmlDeviceGetTemperature": lambda g, sensor: g.temperature,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda g: g.throttle,
        "nvmlDeviceGetTotalEnergyConsumption": energy,
    }
    for name, function in functions.items():
        setattr(mod, name, function)
    return mod
