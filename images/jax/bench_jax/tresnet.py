"""TResNet-M in flax.linen (NHWC), layer for layer as the PyTorch engine's (bench_pytorch/tresnet.py).

The architecture is timm's ``tresnet_m`` (the authors' model): SpaceToDepth stem (block 4, then
a 3x3 conv 48 -> 64 + BN + LeakyReLU(0.01)); BasicBlocks in stages 1-2 and Bottlenecks
(expansion 4) in stages 3-4, layers (3, 4, 11, 3), LeakyReLU(1e-3) inside the blocks and a ReLU
after the residual sum; anti-alias downsampling (the conv that would be strided runs at stride 1
with its BN and activation, then a fixed 3x3 [1,2,1]x[1,2,1]/16 depthwise blur, reflect padding
1, stride 2: BasicBlock after conv1, Bottleneck after the 3x3 conv2); shortcut of the strided
blocks: 2x2 average pool (ceil mode, padding not counted) + 1x1 conv + BN; SE in stages 1-3; a
plain spatial mean ("fast global average pooling") and a Dense head.

Inplace-ABN is computed as BatchNorm followed by LeakyReLU (its memory saving is not
reproduced; XLA decides what it keeps for the backward pass). The blur filter is a constant, not
a parameter. Initialisation as the reference and the other engines: kaiming normal (fan_out,
gain sqrt(2)) convs, BN scale 1 / bias 0 except the last BN of every residual branch (scale 0),
classifier kernel normal(0, 0.01), biases uniform(+-1/sqrt(fan_in)) (PyTorch's default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from bench_engine.api import UnsupportedError

TRESNET_M_LAYERS = (3, 4, 11, 3)
STEM_WIDTH = 64
BLOCK_SIZE = 4  # SpaceToDepth
STEM_SLOPE = 1e-2
BLOCK_SLOPE = 1e-3
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9  # Flax convention (PyTorch's 0.1)

# kaiming_normal_(mode="fan_out", nonlinearity="leaky_relu") with a=0: std = sqrt(2 / fan_out)
conv_init = nn.initializers.variance_scaling(2.0, "fan_out", "normal")
fc_kernel_init = nn.initializers.normal(stddev=0.01)


def uniform_fan_in(fan_in: int) -> Callable[..., jax.Array]:
    """PyTorch's default bias init: uniform(+-1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)

    def init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def space_to_depth(x: jax.Array) -> jax.Array:
    """N,H,W,C -> N,H/4,W/4,16C; channel (i * 4 + j) * C + c holds pixel (4y + i, 4x + j) of channel c."""
    n, h, w, c = x.shape
    if h % BLOCK_SIZE or w % BLOCK_SIZE:
        raise UnsupportedError(f"tresnet_m needs height and width divisible by {BLOCK_SIZE} (SpaceToDepth), got {h}x{w}")
    b = BLOCK_SIZE
    x = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(n, h // b, w // b, b * b * c)


def blur_pool(x: jax.Array, precision: Any = None) -> jax.Array:
    """Anti-alias downsampling: reflect pad 1, fixed 3x3 [1,2,1]x[1,2,1]/16 depthwise filter, stride 2."""
    channels = x.shape[-1]
    taps = jnp.array([1.0, 2.0, 1.0], jnp.float32)
    kernel = (taps[:, None] * taps[None, :] / 16.0).astype(x.dtype)
    kernel = jnp.tile(kernel[:, :, None, None], (1, 1, 1, channels))  # HWIO, one input channel per group
    x = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="reflect")
    return lax.conv_general_dilated(x, kernel, window_strides=(2, 2), padding="VALID",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=channels,
                                    precision=precision)


def avg_pool_ceil(x: jax.Array) -> jax.Array:
    """2x2 average pool, stride 2, ceil mode, padded positions not counted (PyTorch's AvgPool2d as the reference)."""
    h, w = x.shape[1], x.shape[2]
    return nn.avg_pool(x, (2, 2), strides=(2, 2), padding=((0, h % 2), (0, w % 2)), count_include_pad=False)


def _pad(k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return ((k // 2, k // 2), (k // 2, k // 2))


class ConvNormAct(nn.Module):
    """Conv (no bias, stride 1, symmetric padding) + BN + optional LeakyReLU (Inplace-ABN, functionally)."""

    features: int
    kernel: int
    slope: float | None
    conv: Callable[..., nn.Module]
    norm: Callable[..., nn.Module]
    zero_scale: bool = False  # the last BN of a residual branch starts with scale 0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.conv(self.features, (self.kernel, self.kernel), padding=_pad(self.kernel), name="conv")(x)
        scale_init = nn.initializers.zeros if self.zero_scale else nn.initializers.ones
        x = self.norm(scale_init=scale_init, name="bn")(x)
        return nn.leaky_relu(x, self.slope) if self.slope is not None else x


class SqueezeExcite(nn.Module):
    """Spatial mean, 1x1 conv (bias) to ``reduced``, ReLU, 1x1 conv (bias) back, sigmoid gate."""

    reduced: int
    conv: Callable[..., nn.Module]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        gate = jnp.mean(x, axis=(1, 2), keepdims=True)
        gate = self.conv(self.reduced, (1, 1), use_bias=True, bias_init=uniform_fan_in(channels), name="fc1")(gate)
        gate = self.conv(channels, (1, 1), use_bias=True, bias_init=uniform_fan_in(self.reduced), name="fc2")(nn.relu(gate))
        return x * nn.sigmoid(gate)


class Block(nn.Module):
    """A TResNet BasicBlock (``bottleneck`` False) or Bottleneck (expansion 4) with optional SE."""

    planes: int
    stride: int
    use_se: bool
    bottleneck: bool
    conv: Callable[..., nn.Module]
    norm: Callable[..., nn.Module]
    precision: Any = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        unit = partial(ConvNormAct, conv=self.conv, norm=self.norm)
        expansion = 4 if self.bottleneck else 1
        out_width = self.planes * expansion
        shortcut = x
        if self.stride != 1 or x.shape[-1] != out_width:
            if self.stride == 2:
                shortcut = avg_pool_ceil(shortcut)
            shortcut = unit(out_width, 1, None, name="downsample")(shortcut)
        if self.bottleneck:
            out = unit(self.planes, 1, BLOCK_SLOPE, name="conv1")(x)
            out = unit(self.planes, 3, BLOCK_SLOPE, name="conv2")(out)
            if self.stride == 2:
                out = blur_pool(out, self.precision)
            if self.use_se:
                out = SqueezeExcite(max(self.planes * expansion // 8, 64), self.conv, name="se")(out)
            out = unit(out_width, 1, None, zero_scale=True, name="conv3")(out)
        else:
            out = unit(self.planes, 3, BLOCK_SLOPE, name="conv1")(x)
            if self.stride == 2:
                out = blur_pool(out, self.precision)
            out = unit(self.planes, 3, None, zero_scale=True, name="conv2")(out)
            if self.use_se:
                out = SqueezeExcite(max(self.planes * expansion // 4, 64), self.conv, name="se")(out)
        return nn.relu(out + shortcut)


class TResNet(nn.Module):
    """TResNet; input NHWC, output logits."""

    layers: Sequence[int]
    num_classes: int
    width: int = STEM_WIDTH
    dtype: Any = jnp.float32  # compute dtype
    param_dtype: Any = jnp.float32
    precision: Any = None  # lax.Precision for convs and dense (None: the backend default)

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        conv = partial(nn.Conv, use_bias=False, kernel_init=conv_init, dtype=self.dtype, param_dtype=self.param_dtype,
                       precision=self.precision)
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPSILON,
                       dtype=self.dtype, param_dtype=self.param_dtype)
        x = space_to_depth(x)
        x = ConvNormAct(self.width, 3, STEM_SLOPE, conv, norm, name="stem")(x)
        for stage, blocks in enumerate(self.layers):
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                x = Block(self.width * 2 ** stage, stride, use_se=stage < 3, bottleneck=stage >= 2, conv=conv, norm=norm,
                          precision=self.precision, name=f"layer{stage + 1}_{block}")(x)
        x = jnp.mean(x, axis=(1, 2))  # fast global average pooling: a plain mean
        return nn.Dense(self.num_classes, kernel_init=fc_kernel_init, bias_init=uniform_fan_in(x.shape[-1]),
                        dtype=self.dtype, param_dtype=self.param_dtype, precision=self.precision, name="fc")(x)


def tresnet_m(num_classes: int, **kwargs: Any) -> TResNet:
    """TResNet-M: layers (3, 4, 11, 3), 31,389,032 trainable parameters at 1000 classes."""
    return TResNet(layers=TRESNET_M_LAYERS, num_classes=num_classes, **kwargs)
