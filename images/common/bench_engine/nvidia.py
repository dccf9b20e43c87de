"""What every engine reads from NVML about the host's NVIDIA driver (optional: nvidia-ml-py)."""

from __future__ import annotations


def driver_version() -> str | None:
    """The NVIDIA driver version, or None without the bindings, a driver or a GPU."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library or no GPU: the driver is unknown
        return None
    return version.decode() if isinstance(version, bytes) else str(version)
