"""Precision policies with the same meaning in every engine, as JAX applies them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.hardware import has_tf32
from bench_engine.precision import PRECISIONS
from bench_engine.report import PrecisionReport

SUPPORTED = tuple(name for name, info in PRECISIONS.items() if not info.loss_scaling)  # fp16 (loss scaling) is not implemented


@dataclass(frozen=True)
class PrecisionPolicy:
    """What a precision name means here: compute dtype, conv/dense precision, TF32 in effect."""

    name: str
    compute_dtype: str  # float32 | bfloat16 (parameters are always float32)
    highest: bool  # conv and dense at lax.Precision.HIGHEST (true fp32, TF32 off)
    tf32: bool  # float32 convs/matmuls may use TF32 tensor cores

    def report(self, param_dtype: str = "float32") -> PrecisionReport:
        """The result's precision block."""
        return PrecisionReport(self.name, self.compute_dtype, param_dtype, self.tf32, self.tf32, loss_scaling=False)


def tf32_capable(kind: str, devices: list[Any]) -> bool:
    """Whether the device has TF32 tensor cores (NVIDIA compute capability 8.0 or newer)."""
    if kind != "cuda" or not devices:
        return False
    return has_tf32(getattr(devices[0], "compute_capability", None))


def precision_policy(name: str, kind: str, devices: list[Any]) -> PrecisionPolicy:
    """fp32: HIGHEST precision; tf32: the backend default (TF32 on Ampere+ GPUs, refused elsewhere);
    bf16: bfloat16 compute with float32 parameters, what stays float32 at the backend default."""
    if name not in SUPPORTED:
        raise UnsupportedError(f"precision {name!r} unsupported by the jax engine (supported: {', '.join(SUPPORTED)})")
    info = PRECISIONS[name]
    if info.tf32 is False:  # fp32: TF32 off, so HIGHEST
        return PrecisionPolicy(name, info.compute_dtype, highest=True, tf32=False)
    capable = tf32_capable(kind, devices)
    if info.needs_tf32_cores and not capable:
        # The same rule in every engine: tf32 names TF32 tensor-core math, which only exists on CUDA GPUs of
        # compute capability 8.0+; running fp32 under that name would mislabel the result.
        raise UnsupportedError(f"precision {name!r} needs a CUDA GPU with TF32 tensor cores (compute capability 8.0+)")
    if info.needs_cuda and kind != "cuda":
        raise UnsupportedError(f"precision {name!r} needs a CUDA GPU")
    return PrecisionPolicy(name, info.compute_dtype, highest=False, tf32=capable)


def apply_precision(name: str, kind: str, devices: list[Any]) -> PrecisionPolicy:
    """The policy of ``name`` on these devices; fp32 also sets JAX's default matmul precision to highest."""
    policy = precision_policy(name, kind, devices)
    if policy.highest:
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")  # also for any matmul outside the layers
    return policy
