"""GPUs as NVML sees them (nvidia-ml-py). Without NVML or a GPU, says so instead of failing."""

from __future__ import annotations

from typing import Any


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_snapshot() -> dict[str, Any]:
    """{'available': bool, 'reason': str|None, 'driver': str|None, 'cuda_driver': str|None, 'gpus': [...]}"""
    try:
        import pynvml
    except ImportError:
        return {"available": False, "reason": "nvidia-ml-py is not installed", "gpus": []}
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return {"available": False, "reason": f"NVML unavailable ({exc.__class__.__name__}): no NVIDIA driver/GPU", "gpus": []}
    try:
        out: dict[str, Any] = {"available": True, "reason": None, "gpus": []}
        out["driver"] = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        out["cuda_driver"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        for index in range(pynvml.nvmlDeviceGetCount()):
            out["gpus"].append(_device_info(pynvml, index))
        return out
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _safe(call, *args) -> Any:
    try:
        return call(*args)
    except Exception:
        return None


def _device_info(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = _safe(nvml.nvmlDeviceGetMemoryInfo, handle)
    power = _safe(nvml.nvmlDeviceGetPowerManagementLimit, handle)
    mig = _safe(nvml.nvmlDeviceGetMigMode, handle)
    ecc = _safe(nvml.nvmlDeviceGetEccMode, handle)
    return {
        "index": index,
        "name": _text(_safe(nvml.nvmlDeviceGetName, handle)),
        "uuid": _text(_safe(nvml.nvmlDeviceGetUUID, handle)),
        "memory_total_bytes": int(memory.total) if memory else None,
        "power_limit_w": power / 1000.0 if power else None,
        "sm_clock_max_mhz": _safe(nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_SM),
        "mem_clock_max_mhz": _safe(nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_MEM),
        "persistence_mode": _safe(nvml.nvmlDeviceGetPersistenceMode, handle),
        "mig_mode": mig[0] if isinstance(mig, list | tuple) else mig,
        "ecc_mode": ecc[0] if isinstance(ecc, list | tuple) else ecc,
    }
