"""Precision policies with the same meaning in every engine, as JAX applies them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.hardware import has_tf32

PRECISIONS = ("fp32", "tf32", "bf16")  # fp16 (loss scaling) is not implemented


@dataclass(frozen=True)
class PrecisionPolicy:
    """What a precision name means here: compute dtype, conv/dense precision, TF32 in effect."""

    name: str
    compute_dtype: str  # float32 | bfloat16 (parameters are always float32)
    highest: bool  # conv and dense at lax.Precision.HIGHEST (true fp32, TF32 off)
    tf32: bool  # float32 convs/matmuls may use TF32 tensor cores

    def report(self) -> dict[str, Any]:
        """The result's precision block."""
        return {"name": self.name, "compute_dtype": self.compute_dtype, "param_dtype": "float32",
                "tf32_matmul": self.tf32, "tf32_conv": self.tf32, "loss_scaling": False}


def tf32_capable(kind: str, devices: list[Any]) -> bool:
    """Whether the device has TF32 tensor cores (NVIDIA compute capability 8.0 or newer)."""
    if kind != "cuda" or not devices:
        return False
    return has_tf32(getattr(devices[0], "compute_capability", None))


def precision_policy(name: str, kind: str, devices: list[Any]) -> PrecisionPolicy:
    """fp32: HIGHEST precision; tf32: the backend default (TF32 on Ampere+ GPUs, refused elsewhere);
    bf16: bfloat16 compute with float32 parameters, what stays float32 at the backend default."""
    if name not in PRECISIONS:
        raise UnsupportedError(f"precision {name!r} unsupported by the jax engine (supported: {', '.join(PRECISIONS)})")
    if name == "fp32":
        return PrecisionPolicy(name, "float32", highest=True, tf32=False)
    if name == "tf32" and not tf32_capable(kind, devices):
        # The same rule in every engine: tf32 names TF32 tensor-core math, which only exists on CUDA GPUs of
        # compute capability 8.0+; running fp32 under that name would mislabel the result.
        raise UnsupportedError("precision 'tf32' needs a CUDA GPU with TF32 tensor cores (compute capability 8.0+)")
    return PrecisionPolicy(name, "bfloat16" if name == "bf16" else "float32", highest=False, tf32=tf32_capable(kind, devices))


def apply_precision(name: str, kind: str, devices: list[Any]) -> PrecisionPolicy:
    """The policy of ``name`` on these devices; fp32 also sets JAX's default matmul precision to highest."""
    policy = precision_policy(name, kind, devices)
    if name == "fp32":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")  # also for any matmul outside the layers
    return policy
