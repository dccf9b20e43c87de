"""The run's optimizer: ``torch.optim.SGD`` or ``Adam`` as the spec sets it, built for the step that runs it.

Weight decay is coupled L2 (added to the gradient), as both torch classes do. A step captured in a
CUDA graph needs a *capturable* optimizer: torch's Adam keeps its step counter on the host unless
``capturable=True`` (or fused), and refuses a capture otherwise
(``Optimizer._accelerator_graph_capture_health_check``). SGD keeps no counter and has no such flag:
every SGD implementation is capturable. The fused implementations take GradScaler's ``grad_scale``
and ``found_inf`` as device tensors (``_step_supports_amp_scaling``); the others make GradScaler
read ``found_inf`` on the host (``.item()``), which no capture allows.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from bench_engine.api import UnsupportedError

OPTIMIZERS = ("sgd", "adam")
CLASS_NAMES = {"sgd": "SGD", "adam": "Adam"}


@dataclass(frozen=True)
class OptimizerSettings:
    """The spec's ``parity.optimizer``: fields that do not apply to ``name`` are None."""

    name: str
    lr: float
    weight_decay: float = 0.0
    momentum: float | None = None
    nesterov: bool | None = None
    betas: tuple[float, float] | None = None
    eps: float | None = None

    @classmethod
    def from_spec(cls, block: Mapping[str, Any]) -> OptimizerSettings:
        name = str(block["name"])
        if name not in OPTIMIZERS:
            raise UnsupportedError(f"optimizer {name!r} is not implemented")
        if name == "adam":
            beta1, beta2 = block["betas"]
            return cls(name, float(block["lr"]), float(block["weight_decay"]), betas=(float(beta1), float(beta2)),
                       eps=float(block["eps"]))
        return cls(name, float(block["lr"]), float(block["weight_decay"]), momentum=float(block["momentum"]),
                   nesterov=bool(block["nesterov"]))


def supports_capturable(name: str) -> bool:
    """Whether torch's class has a ``capturable`` flag (Adam); SGD is capturable without one."""
    return name == "adam"


def make_optimizer(params: Iterable[torch.nn.Parameter], settings: OptimizerSettings, fused: bool,
                   capturable: bool) -> torch.optim.Optimizer:
    """The optimizer of ``settings``; ``fused`` picks torch's fused kernels, ``capturable`` a CUDA-graph-safe step."""
    if capturable:  # the side-stream warmup steps before the capture run uncaptured, as they must
        warnings.filterwarnings("ignore", message="This instance was constructed with capturable=True")
    if settings.name == "adam":
        assert settings.betas is not None and settings.eps is not None
        return torch.optim.Adam(params, lr=settings.lr, betas=settings.betas, eps=settings.eps,
                                weight_decay=settings.weight_decay, capturable=capturable, fused=True if fused else None)
    if settings.name == "sgd":
        assert settings.momentum is not None and settings.nesterov is not None
        return torch.optim.SGD(params, lr=settings.lr, momentum=settings.momentum, weight_decay=settings.weight_decay,
                               nesterov=settings.nesterov, fused=True if fused else None)
    raise UnsupportedError(f"optimizer {settings.name!r} is not implemented")


def is_fused(optimizer: torch.optim.Optimizer) -> bool:
    """Every parameter group runs torch's fused kernels (read from the live object)."""
    return all(bool(group.get("fused")) for group in optimizer.param_groups)


def is_capturable(optimizer: torch.optim.Optimizer) -> bool:
    """A CUDA graph may capture the step: Adam's groups say ``capturable``; SGD always may."""
    if isinstance(optimizer, torch.optim.SGD):
        return True
    return all(bool(group.get("capturable")) for group in optimizer.param_groups)
