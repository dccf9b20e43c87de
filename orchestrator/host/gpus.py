"""GPUs as NVML sees them (nvidia-ml-py), the one place bench opens NVML: the host's GPUs and driver
(``nvml_snapshot``), the GPUs a run may use (``visible_ids``, ``requested_devices``) and their facts.
Without NVML or a GPU, says so instead of failing."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple


def visible_ids(visible: Any) -> tuple[str, ...]:
    """A visible-devices setting ('0,2', [0, 2], 3, 'all' or empty) as device ids; empty means every GPU."""
    if visible is None or visible == "" or visible == "all":
        return ()
    items = visible.split(",") if isinstance(visible, str) else list(visible) if isinstance(visible, list | tuple) else [visible]
    return tuple(str(item).strip() for item in items if str(item).strip())


@dataclass(frozen=True)
class DriverFacts:
    """The driver version and the CUDA version it supports."""

    driver: str | None
    cuda_driver: str | None


@dataclass(frozen=True)
class GpuFacts:
    """Static facts of one GPU as NVML reports them; a field the GPU or driver does not support is None."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    compute_capability: str | None
    memory_total_bytes: int | None
    power_limit_w: float | None
    enforced_power_limit_w: float | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    sm_clock_max_mhz: int | None
    mem_clock_max_mhz: int | None
    sm_clock_applications_mhz: int | None
    persistence_mode: int | None
    mig_mode: int | None
    ecc_mode: int | None
    energy_counter: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # the fields in their declared order: the records' key order


@dataclass(frozen=True)
class NvmlSnapshot:
    """The host's GPUs and driver as NVML saw them once (``available`` False, with the reason, without NVML)."""

    available: bool
    reason: str | None
    gpus: tuple[GpuFacts, ...] = ()
    driver: DriverFacts | None = None

    def __post_init__(self) -> None:
        if not self.available and (self.gpus or self.reason is None):
            raise ValueError("an unavailable NVML snapshot names its reason and no GPU")

    def to_json(self) -> dict[str, Any]:
        """The run record's and summary's ``nvml`` block."""
        if not self.available:
            return {"available": False, "reason": self.reason, "gpus": []}
        driver = asdict(self.driver) if self.driver else {"driver": None, "cuda_driver": None}
        return {"available": True, "reason": self.reason, **driver, "gpus": [gpu.to_json() for gpu in self.gpus]}


def nvml_snapshot() -> NvmlSnapshot:
    """The host's GPUs and driver, or why NVML cannot say."""
    nvml, why = load_nvml()
    if nvml is None:
        return NvmlSnapshot(False, why or "NVML unavailable")
    try:
        count = int(nvml.nvmlDeviceGetCount())
        gpus = tuple(device_facts(nvml, i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count))
        return NvmlSnapshot(True, None, gpus, driver_facts(nvml))
    finally:
        nvml_call(nvml.nvmlShutdown)


def nvml_text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_call(call: Any, *args: Any) -> Any:
    """A field the GPU or driver does not support reads as None."""
    try:
        return call(*args)
    except Exception:
        return None


def first_of(value: Any) -> Any:
    return value[0] if isinstance(value, list | tuple) else value


def load_nvml() -> tuple[Any, str | None]:
    """(pynvml module initialised, None) or (None, why not)."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"NVML unavailable ({exc.__class__.__name__}): no NVIDIA driver/GPU"
    return pynvml, None


def driver_facts(nvml: Any) -> DriverFacts:
    """The driver version and the CUDA version it supports."""
    cuda = nvml_call(nvml.nvmlSystemGetCudaDriverVersion)
    return DriverFacts(nvml_text(nvml_call(nvml.nvmlSystemGetDriverVersion)),
                       f"{cuda // 1000}.{(cuda % 1000) // 10}" if isinstance(cuda, int) else None)


class GpuRequest(NamedTuple):
    """What a run monitor is told of the GPUs a run may use (``RuntimeSettings.gpu_request``)."""

    runtime: str | None = None  # the run's runtime, once checked
    visible: tuple[str, ...] | None = None  # visible_devices as given ((): all; None: not given)
    environment_visible: str | None = None  # CUDA_VISIBLE_DEVICES of the run's added environment
    sampled: bool = True  # False: no telemetry for this run


def requested_devices(request: GpuRequest) -> list[str] | None:
    """The GPUs a run may use, as given (indices or UUIDs), or None for all.

    ``visible_devices`` first ('all' or empty: every GPU); for a process on this host (local runtime)
    also ``CUDA_VISIBLE_DEVICES`` of its environment; a container gets every GPU unless told otherwise.
    """
    visible: Any = request.visible
    if visible is None and request.runtime != "docker":
        visible = request.environment_visible if request.environment_visible is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    return list(visible_ids(visible)) or None


def resolve_handles(nvml: Any, wanted: list[str] | None) -> tuple[list[tuple[int, Any]], list[str]]:
    """[(nvml index, handle)] of the wanted GPUs and notes about entries that could not be resolved."""
    count = int(nvml.nvmlDeviceGetCount())
    if wanted is None:
        return [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)], []
    by_uuid: dict[str, int] = {}
    for i in range(count):
        uuid = nvml_text(nvml_call(nvml.nvmlDeviceGetUUID, nvml.nvmlDeviceGetHandleByIndex(i)))
        if uuid:
            by_uuid[uuid] = i
    chosen: list[int] = []
    notes: list[str] = []
    for item in wanted:
        if item.isdigit() and int(item) < count:
            index: int | None = int(item)
        else:
            index = by_uuid.get(item)
            if index is None and item.startswith("GPU-"):  # CUDA accepts a unique UUID prefix
                index = next((i for u, i in by_uuid.items() if u.startswith(item)), None)
        if index is None:
            notes.append(f"visible device {item!r} is not an NVML GPU")
            if item.isdigit():
                break  # CUDA ignores every entry after an invalid one
            continue
        if index not in chosen:
            chosen.append(index)
    return [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in chosen], notes


def device_facts(nvml: Any, index: int, handle: Any) -> GpuFacts:
    """Static facts of one GPU; unsupported fields are None."""
    memory = nvml_call(nvml.nvmlDeviceGetMemoryInfo, handle)
    power_limit = nvml_call(nvml.nvmlDeviceGetPowerManagementLimit, handle)
    enforced = nvml_call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle) if hasattr(nvml, "nvmlDeviceGetEnforcedPowerLimit") else None
    capability = nvml_call(nvml.nvmlDeviceGetCudaComputeCapability, handle) if hasattr(nvml, "nvmlDeviceGetCudaComputeCapability") else None
    pci = nvml_call(nvml.nvmlDeviceGetPciInfo, handle) if hasattr(nvml, "nvmlDeviceGetPciInfo") else None
    sm, mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
    ecc = nvml_call(nvml.nvmlDeviceGetEccMode, handle)
    mig = nvml_call(nvml.nvmlDeviceGetMigMode, handle)

    def optional(name: str, *args: Any) -> Any:
        call = getattr(nvml, name, None)
        return nvml_call(call, handle, *args) if call else None

    energy = optional("nvmlDeviceGetTotalEnergyConsumption")
    return GpuFacts(
        index=index,
        name=nvml_text(nvml_call(nvml.nvmlDeviceGetName, handle)),
        uuid=nvml_text(nvml_call(nvml.nvmlDeviceGetUUID, handle)),
        pci_bus_id=nvml_text(getattr(pci, "busId", None)) if pci is not None else None,
        compute_capability=f"{capability[0]}.{capability[1]}" if isinstance(capability, list | tuple) and len(capability) == 2 else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        power_limit_w=power_limit / 1000.0 if power_limit else None,
        enforced_power_limit_w=enforced / 1000.0 if enforced else None,
        sm_clock_mhz=optional("nvmlDeviceGetClockInfo", sm),
        mem_clock_mhz=optional("nvmlDeviceGetClockInfo", mem),
        sm_clock_max_mhz=optional("nvmlDeviceGetMaxClockInfo", sm),
        mem_clock_max_mhz=optional("nvmlDeviceGetMaxClockInfo", mem),
        sm_clock_applications_mhz=optional("nvmlDeviceGetApplicationsClock", sm),
        persistence_mode=nvml_call(nvml.nvmlDeviceGetPersistenceMode, handle),
        mig_mode=first_of(mig),
        ecc_mode=first_of(ecc),
        energy_counter=energy is not None,
    )
