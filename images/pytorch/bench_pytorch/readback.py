"""What the PyTorch engine reports about itself, read from its live objects (docs/engine-contract.md).

The shared initial weights are loaded into the module by name (the file uses torchvision's names
and PyTorch's layouts, so no conversion) and hashed from ``state_dict()`` afterwards. One traced
step (eval mode, so batch-norm statistics stay untouched; no optimizer update) shows the dtype a
convolution really computes in under the run's precision policy and the gradients' dtype.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from bench_engine.api import UnsupportedError
from bench_engine.contract import RunSpec
from bench_engine.initweights import InitError, canonical_sha256, read_init, require
from bench_engine.report import FRAMEWORK_INIT, InitReadback, LossReadback, Observed, OptimizerReadback, Traced
from bench_pytorch.optimizer import is_capturable, is_fused
from bench_pytorch.precision import Precision


def _dtype(value: torch.dtype) -> str:
    return str(value).removeprefix("torch.")


def _class(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def load_shared_init(spec: RunSpec, model: nn.Module) -> InitReadback:
    """Load ``parity.init`` (shared) into ``model``; return its mode and the hash of what the model now holds."""
    path = spec.init_file()
    if path is None:
        return FRAMEWORK_INIT
    if spec.parity.arch != "resnet50_v1.5":
        raise UnsupportedError(f"shared initial weights: no layout for {spec.parity.arch}")
    tensors, _ = read_init(path)
    state = model.state_dict()
    names = [name for name in state if not name.endswith("num_batches_tracked")]
    if set(names) != set(tensors):
        missing, extra = sorted(set(names) - set(tensors)), sorted(set(tensors) - set(names))
        raise InitError(f"initial weights do not fit the model: missing {missing[:3]}, unexpected {extra[:3]}")
    with torch.no_grad():
        for name in names:
            state[name].copy_(torch.from_numpy(require(tensors, name, tuple(state[name].shape))))
    return InitReadback("shared", state_sha256(model, names))


def state_sha256(model: nn.Module, names: list[str]) -> str:
    """Canonical hash of the model's tensors ``names``, read back from the module."""
    state = model.state_dict()
    return canonical_sha256({name: state[name].detach().float().cpu().numpy() for name in names})


def optimizer_readback(optimizer: torch.optim.Optimizer) -> OptimizerReadback:
    """Name, class and hyper-parameters from the optimizer's first parameter group; fused and
    capturable from every group (capturable: a CUDA graph may capture its step)."""
    group = optimizer.param_groups[0]
    is_adam = isinstance(optimizer, torch.optim.Adam)
    as_float = lambda v: float(v.item()) if isinstance(v, torch.Tensor) else float(v)  # noqa: E731
    return OptimizerReadback(
        name="adam" if is_adam else "sgd" if isinstance(optimizer, torch.optim.SGD) else type(optimizer).__name__.lower(),
        class_=_class(optimizer),
        lr=as_float(group["lr"]),
        weight_decay=as_float(group["weight_decay"]),
        momentum=None if is_adam else as_float(group["momentum"]),
        nesterov=None if is_adam else bool(group["nesterov"]),
        betas=tuple(as_float(b) for b in group["betas"]) if is_adam else None,
        eps=as_float(group["eps"]) if is_adam else None,
        fused=is_fused(optimizer),
        capturable=is_capturable(optimizer),
    )


def loss_readback(loss_fn: nn.Module) -> LossReadback:
    names = {nn.CrossEntropyLoss: "cross_entropy"}
    return LossReadback(names.get(type(loss_fn), type(loss_fn).__name__), _class(loss_fn), str(getattr(loss_fn, "reduction", "?")),
                        float(getattr(loss_fn, "label_smoothing", 0.0)))


def traced_step(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, precision: Precision,
                loss_fn: nn.Module | None) -> Traced:
    """Forward (and backward, when training) of a real batch under the precision policy, without update.

    Returns input_shape [H, W, C], num_classes, and the observed dtypes; the model's mode and
    gradients are left as they were (eval mode for the pass: running statistics are not updated).
    """
    conv = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    seen: dict[str, torch.dtype] = {}

    def record(_module: nn.Module, _inputs: Any, out: torch.Tensor) -> None:  # returns None: the output is kept
        seen.setdefault("conv", out.dtype)

    hook = conv.register_forward_hook(record)
    was_training = model.training
    model.eval()
    try:
        with precision.autocast():
            logits = model(images)
            loss = loss_fn(logits, labels) if loss_fn is not None else None
        grad_dtype = None
        if loss is not None:
            loss.float().backward()
            grad = conv.weight.grad
            grad_dtype = _dtype(grad.dtype) if grad is not None else None
    finally:
        hook.remove()
        model.train(was_training)
        for param in model.parameters():
            param.grad = None
    return Traced((int(images.shape[2]), int(images.shape[3]), int(images.shape[1])), int(logits.shape[-1]),
                  Observed(_dtype(seen["conv"]), grad_dtype, _dtype(logits.dtype)))


def param_dtypes(model: nn.Module) -> tuple[str, ...]:
    return tuple(sorted({_dtype(p.dtype) for p in model.parameters() if p.requires_grad}))
