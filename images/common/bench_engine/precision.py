"""What each precision name means, once for every engine and for parity.

Engines keep only their framework's spelling of a dtype (``"bfloat16"`` -> ``torch.bfloat16``) and
the checks only their framework can make; the schemas' enum of names equals :data:`NAMES` (a test
keeps them equal), and an engine.yaml ``precisions:`` list names the subset an engine supports.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from bench_engine.api import UnsupportedError
from bench_engine.hardware import TF32_MIN_MAJOR


@dataclass(frozen=True)
class PrecisionInfo:
    """One precision name: the dtypes it computes and stores in, its TF32 rule, loss scaling, hardware it needs."""

    name: str
    compute_dtype: str  # canonical dtype of convolutions and matmuls: float32 | bfloat16 | float16
    tf32: bool | None  # TF32 for float32 math: on, off, or None (not part of the name: the engine's choice)
    loss_scaling: bool = False  # training scales the loss (dynamic loss scaling)
    needs_cuda: bool = False  # refused on a device other than a CUDA GPU
    needs_tf32_cores: bool = False  # refused on a GPU without TF32 tensor cores (compute capability < min_capability)
    param_dtype: str = "float32"  # trainable parameters (the master weights) are float32 under every name

    @property
    def min_capability(self) -> int | None:
        """The lowest NVIDIA compute-capability major version that runs this name (None: any)."""
        return TF32_MIN_MAJOR if self.needs_tf32_cores else None


PRECISIONS: MappingProxyType[str, PrecisionInfo] = MappingProxyType({
    "fp32": PrecisionInfo("fp32", "float32", tf32=False),  # IEEE fp32 math
    "tf32": PrecisionInfo("tf32", "float32", tf32=True, needs_cuda=True, needs_tf32_cores=True),  # TF32 tensor-core math
    "bf16": PrecisionInfo("bf16", "bfloat16", tf32=None),  # mixed precision, fp32 master weights
    "fp16": PrecisionInfo("fp16", "float16", tf32=None, loss_scaling=True, needs_cuda=True),  # mixed, with loss scaling
})
NAMES: tuple[str, ...] = tuple(PRECISIONS)


def precision_info(name: str) -> PrecisionInfo:
    """The meaning of ``name``; an unknown name is unsupported."""
    try:
        return PRECISIONS[name]
    except KeyError:
        raise UnsupportedError(f"unknown precision {name!r}") from None
