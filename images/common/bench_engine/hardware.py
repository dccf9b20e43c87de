"""Host and CUDA facts every engine reports the same way: the CPU's name, version numbers in words,
and which GPUs have TF32 tensor cores."""

from __future__ import annotations

import platform

MODEL_KEYS = ("model name", "Processor", "cpu model", "Hardware", "cpu")  # x86, older ARM, MIPS, ARM boards, POWER
TF32_MIN_MAJOR = 8  # NVIDIA compute capability 8.0 (Ampere) and newer have TF32 tensor cores


def cpu_model_of(cpuinfo: str) -> str | None:
    """The CPU model a /proc/cpuinfo text names (x86 'model name', else the ARM or POWER lines), whitespace collapsed."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip(), " ".join(value.split()))
    return next((fields[k] for k in MODEL_KEYS if k in fields), None)


def cpu_name() -> str:
    """The CPU model as /proc/cpuinfo names it (the platform's processor or machine elsewhere)."""
    try:
        with open("/proc/cpuinfo") as handle:
            model = cpu_model_of(handle.read())
    except OSError:
        model = None
    return model or platform.processor() or platform.machine() or "cpu"


def cuda_version_text(value: int | None) -> str | None:
    """CUDA's integer version in words: 12080 -> '12.8'."""
    if not value:
        return None
    return f"{value // 1000}.{value % 1000 // 10}"


def cudnn_version_text(value: int | None) -> str | None:
    """cuDNN's integer version in words: 90800 -> '9.8.0' (major*10000 from cuDNN 9), 8907 -> '8.9.7' (major*1000 before)."""
    if not value:
        return None
    major, rest = divmod(value, 10000) if value >= 10000 else divmod(value, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def has_tf32(capability_major: int | float | str | None) -> bool:
    """Whether a GPU of this compute-capability major version has TF32 tensor cores (unknown: assumed yes)."""
    if capability_major is None:
        return True
    try:
        return float(str(capability_major).split(".")[0]) >= TF32_MIN_MAJOR
    except ValueError:
        return True
