"""BatchNorm folded into the convolutions for inference (what PyTorch's Inductor freezing does).

In inference BatchNorm is a fixed per-channel affine map of its convolution's output:
``bn(conv(x, w)) = conv(x, w * s) + (beta - mean * s)`` with ``s = gamma / sqrt(var + eps)``. The folded
ResNet (``ResNet(fold_batchnorm=True)``) has convolutions with a bias and no BatchNorm, so the compiled
forward reads no statistics and XLA can fuse bias, residual add and ReLU into cuDNN's fused convolution
instead of running the BatchNorm affine as passes over the activations. The folded weights are computed
once, in float32, from the same variables; the logits equal the unfolded model's within rounding (tested).
The run still reports the model as defined (its parameters, its read-back trace).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from bench_engine.api import UnsupportedError
from bench_engine.report import Switch
from bench_jax.model import BN_EPSILON


def _bn_name(conv: str) -> str:
    """The BatchNorm after a convolution of bench's ResNet: conv1 -> bn1, downsample_conv -> downsample_bn."""
    return conv.replace("conv", "bn")


def _is_conv(name: str, node: Any) -> bool:
    return isinstance(node, dict) and "kernel" in node and "conv" in name


def fold_batchnorm(variables: dict[str, Any], epsilon: float = BN_EPSILON) -> dict[str, Any]:
    """``{"params": ..., "batch_stats": ...}`` of bench's ResNet -> the folded model's ``{"params": ...}``.

    Every convolution takes its BatchNorm's scale into its kernel (per output channel, the kernel's last axis)
    and the BatchNorm's shift as a bias; the BatchNorm entries go; other layers (the classifier) stay as they are.
    ValueError when a convolution has no BatchNorm beside it or a BatchNorm no convolution (not this model)."""

    def walk(params: dict[str, Any], stats: dict[str, Any], where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        convs = {name for name, node in params.items() if _is_conv(name, node)}
        norms = {name for name, node in stats.items() if isinstance(node, dict) and "mean" in node}
        for name in convs:
            bn = _bn_name(name)
            if bn not in params or bn not in stats:
                raise ValueError(f"{where}{name}: no BatchNorm {bn} to fold")
        for name in norms:
            if not any(_bn_name(conv) == name for conv in convs):
                raise ValueError(f"{where}{name}: a BatchNorm after no convolution")
        for name, node in params.items():
            if name in convs:
                bn, st = params[_bn_name(name)], stats[_bn_name(name)]
                kernel = jnp.asarray(node["kernel"], jnp.float32)
                scale = jnp.asarray(bn["scale"], jnp.float32) * jnp.reciprocal(jnp.sqrt(jnp.asarray(st["var"], jnp.float32) + epsilon))
                bias = jnp.asarray(bn["bias"], jnp.float32) - jnp.asarray(st["mean"], jnp.float32) * scale
                dtype = node["kernel"].dtype
                out[name] = {"kernel": (kernel * scale).astype(dtype), "bias": bias.astype(dtype)}
            elif name in norms:
                continue
            elif isinstance(node, dict) and not ("kernel" in node or "scale" in node):
                out[name] = walk(node, stats.get(name, {}), f"{where}{name}.")
            else:
                out[name] = node
        return out

    return {"params": walk(variables["params"], variables.get("batch_stats", {}), "")}


def folded_inference(option: bool | str, optimized: bool, parity: Any, model: Any, state: Any) -> tuple[Any, Any, Switch]:
    """(the model the steps run, its variables, the ``batchnorm_folded`` switch) for the ``fold_batchnorm`` option.

    ``auto`` folds on the optimized path of bench's ResNet-50 in inference on one device (measured on an H200:
    bf16 batch 256 from 24,017 to 31,560 img/s, medians of 5) and says why not elsewhere; ``true`` asked for anything else is an
    UnsupportedError (the run fails as unsupported rather than run another program than the one asked for)."""
    why = "auto" if option == "auto" else "option"
    if option is False or (option == "auto" and not optimized):
        return model, state, Switch(False, f"{why}: BatchNorm kept as its own op" + ("" if optimized or why == "option" else " (baseline)"))
    if parity.mode != "infer":
        if why == "auto":
            return model, state, Switch(False, "training: BatchNorm normalises with the batch's statistics")
        raise UnsupportedError("engine option fold_batchnorm: true applies to inference only (training updates the statistics)")
    if parity.arch != "resnet50_v1.5" or parity.devices != 1:
        if why == "auto":
            return model, state, Switch(False, f"auto: folds bench's ResNet-50 on one device, not {parity.arch} on {parity.devices}")
        raise UnsupportedError(f"engine option fold_batchnorm: true folds bench's ResNet-50 on one device, not {parity.arch} "
                               f"on {parity.devices}")
    folded = fold_batchnorm(jax.device_get(state))
    target = jax.tree.leaves(state)[0].devices().pop()
    step_model = model.clone(fold_batchnorm=True)
    return step_model, jax.device_put(folded, target), Switch(
        True, f"{why}: every BatchNorm folded into its convolution (kernel x gamma/sqrt(var+eps), bias beta - mean x "
              "that scale, computed once in float32), as Inductor freezing does for PyTorch; logits equal within rounding")
