"""Precision policies with the same meaning in every engine, reported as really in effect."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from bench_engine.api import UnsupportedError
from bench_engine.hardware import has_tf32
from bench_engine.precision import precision_info
from bench_engine.report import PrecisionReport

_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}  # registry dtype -> torch


@dataclass
class Precision:
    """The policy in force: autocast dtype (None for fp32 math), loss scaling, TF32 flags."""

    name: str
    device_type: str
    autocast_dtype: torch.dtype | None
    loss_scaling: bool
    tf32_capable: bool = False  # the device has TF32 tensor cores (CUDA, Ampere or newer)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The autocast context of a forward pass (a no-op for fp32 and tf32)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.autocast_dtype)

    def make_scaler(self) -> torch.amp.GradScaler | None:
        """A GradScaler when the policy scales the loss (fp16 training), else None."""
        return torch.amp.GradScaler(self.device_type) if self.loss_scaling else None

    def report(self, param_dtype: str = "float32") -> PrecisionReport:
        """The schema's precision block, with TF32 flags read back from torch."""
        compute = self.autocast_dtype or torch.float32
        return PrecisionReport(
            name=self.name,
            compute_dtype=str(compute).removeprefix("torch."),
            param_dtype=param_dtype,
            # the TF32 flags only act on TF32 tensor cores; elsewhere TF32 is off in effect
            tf32_matmul=bool(self.tf32_capable and torch.backends.cuda.matmul.allow_tf32),
            tf32_conv=bool(self.tf32_capable and torch.backends.cudnn.allow_tf32),
            loss_scaling=self.loss_scaling,
        )


def _set_tf32(enabled: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    torch.set_float32_matmul_precision("high" if enabled else "highest")


def apply_precision(name: str, device: torch.device, training: bool) -> Precision:
    """Set the global math flags for ``name`` on ``device`` and return the policy.

    fp32: IEEE fp32 (TF32 off). tf32: TF32 for matmul and conv (CUDA, Ampere or newer). bf16/fp16:
    autocast with fp32 master weights and TF32 off for what stays fp32; fp16 scales the loss (CUDA only).
    """
    info = precision_info(name)
    cuda = device.type == "cuda"
    if info.needs_cuda and not cuda:
        raise UnsupportedError(f"precision {name} needs CUDA (device is {device.type})")
    tf32_capable = cuda and has_tf32(torch.cuda.get_device_capability(device)[0])
    if info.needs_tf32_cores and not tf32_capable:
        raise UnsupportedError(f"precision {name} needs TF32 tensor cores (an Ampere or newer GPU)")
    compute = _TORCH_DTYPES[info.compute_dtype]
    if compute is torch.bfloat16 and cuda and not torch.cuda.is_bf16_supported():
        raise UnsupportedError(f"precision {name} is not supported by this GPU")
    _set_tf32(info.tf32 is True)  # off for fp32 and, for what stays fp32, under bf16/fp16
    return Precision(
        name=name,
        device_type=device.type,
        autocast_dtype=None if compute is torch.float32 else compute,
        loss_scaling=info.loss_scaling and training,
        tf32_capable=tf32_capable,
    )
