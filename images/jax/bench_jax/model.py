"""ResNet-50 v1.5 in flax.linen, layer for layer as torchvision's ``resnet50`` (NHWC layout).

Explicit symmetric padding (as PyTorch) instead of ``'SAME'``, so every shape and every
strided window matches; no conv biases; batch norm with epsilon 1e-5 and momentum 0.9 in
Flax's convention (PyTorch's 0.1); torchvision's initialisation family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from bench_engine.api import UnsupportedError
from bench_jax.tresnet import tresnet_m

# (blocks, bottleneck width) per stage; the output width is 4x the bottleneck width
RESNET50_STAGES: tuple[tuple[int, int], ...] = ((3, 64), (4, 128), (6, 256), (3, 512))
EXPANSION = 4
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9

# torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu") for every conv
conv_init = nn.initializers.variance_scaling(2.0, "fan_out", "normal")
# torch.nn.Linear: kaiming_uniform_(a=sqrt(5)) = uniform(+-1/sqrt(fan_in)) for the kernel
dense_kernel_init = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def dense_bias_init(fan_in: int) -> Callable[..., jax.Array]:
    """torch.nn.Linear's bias init: uniform(+-1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)

    def init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _pad(k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """PyTorch's symmetric padding k // 2 on both spatial axes."""
    return ((k // 2, k // 2), (k // 2, k // 2))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 with the stride (v1.5), 1x1 expand; projection shortcut when asked."""

    width: int
    stride: int
    projection: bool
    conv: Callable[..., nn.Module]
    norm: Callable[..., nn.Module]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        out = self.conv(self.width, (1, 1), padding=_pad(1), name="conv1")(x)
        out = nn.relu(self.norm(name="bn1")(out))
        out = self.conv(self.width, (3, 3), strides=(self.stride, self.stride), padding=_pad(3), name="conv2")(out)
        out = nn.relu(self.norm(name="bn2")(out))
        out = self.conv(self.width * EXPANSION, (1, 1), padding=_pad(1), name="conv3")(out)
        out = self.norm(name="bn3")(out)
        shortcut = x
        if self.projection:
            shortcut = self.conv(self.width * EXPANSION, (1, 1), strides=(self.stride, self.stride), padding=_pad(1),
                                 name="downsample_conv")(x)
            shortcut = self.norm(name="downsample_bn")(shortcut)
        return nn.relu(out + shortcut)


class Folded(nn.Module):
    """Where a BatchNorm was, once folded into the convolution before it: the identity."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return x


class ResNet(nn.Module):
    """torchvision-style ResNet with bottleneck blocks; input NHWC, output logits."""

    stages: Sequence[tuple[int, int]]
    num_classes: int
    dtype: Any = jnp.float32  # compute dtype
    param_dtype: Any = jnp.float32
    precision: Any = None  # lax.Precision for conv and dense (None: the backend default)
    # inference only: every BatchNorm folded into its convolution (a conv bias, no BatchNorm; bench_jax.folding)
    fold_batchnorm: bool = False

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        if self.fold_batchnorm and train:
            raise ValueError("a ResNet with BatchNorm folded into its convolutions is for inference only")
        conv = partial(nn.Conv, use_bias=self.fold_batchnorm, kernel_init=conv_init, dtype=self.dtype,
                       param_dtype=self.param_dtype, precision=self.precision)
        # Flax promotes the statistics to float32 (force_float32_reductions) whatever the compute dtype
        norm: Callable[..., nn.Module] = Folded if self.fold_batchnorm else partial(
            nn.BatchNorm, use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPSILON,
            dtype=self.dtype, param_dtype=self.param_dtype)
        x = conv(64, (7, 7), strides=(2, 2), padding=_pad(7), name="conv1")(x)
        x = nn.relu(norm(name="bn1")(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=_pad(3))
        in_width = 64
        for stage, (blocks, width) in enumerate(self.stages):
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                projection = block == 0 and (stride != 1 or in_width != width * EXPANSION)
                x = Bottleneck(width, stride, projection, conv, norm, name=f"layer{stage + 1}_{block}")(x)
                in_width = width * EXPANSION
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, kernel_init=dense_kernel_init, bias_init=dense_bias_init(in_width),
                        dtype=self.dtype, param_dtype=self.param_dtype, precision=self.precision, name="fc")(x)


def resnet50(num_classes: int, **kwargs: Any) -> ResNet:
    """ResNet-50 v1.5 (stride on the 3x3 conv of each bottleneck)."""
    return ResNet(stages=RESNET50_STAGES, num_classes=num_classes, **kwargs)


MODELS: dict[str, Callable[..., nn.Module]] = {
    "resnet50_v1.5": resnet50,
    "tresnet_m": tresnet_m,  # bench_jax/tresnet.py
}


def build_model(arch: str, num_classes: int, **kwargs: Any) -> nn.Module:
    """The Flax module for ``arch``; UnsupportedError for an architecture this engine lacks."""
    builder = MODELS.get(arch)
    if builder is None:
        raise UnsupportedError(f"jax engine has no model {arch!r} (known: {', '.join(sorted(MODELS))})")
    return builder(num_classes, **kwargs)


def count_parameters(tree: Any) -> int:
    """Number of scalars in a pytree of arrays (or ShapeDtypeStructs)."""
    return int(sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(tree)))
