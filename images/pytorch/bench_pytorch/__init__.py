"""bench's PyTorch engine: ``python -m bench_pytorch --spec SPEC.json --result RESULT.json``."""

from bench_pytorch.engine import PyTorchEngine

__all__ = ["PyTorchEngine"]
