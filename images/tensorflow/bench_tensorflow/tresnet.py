"""TResNet-M as a Keras functional model (NHWC), layer for layer as bench_pytorch/tresnet.py.

The architecture is timm's ``tresnet_m`` (the authors' model): SpaceToDepth stem (block 4, then
a 3x3 conv 48 -> 64 + BN + LeakyReLU(0.01)); BasicBlocks in stages 1-2 and Bottlenecks
(expansion 4) in stages 3-4, layers (3, 4, 11, 3), LeakyReLU(1e-3) inside the blocks and a ReLU
after the residual sum; anti-alias downsampling (the conv that would be strided runs at stride 1
with its BN and activation, then a fixed 3x3 [1,2,1]x[1,2,1]/16 depthwise blur, reflect padding
1, stride 2: BasicBlock after conv1, Bottleneck after the 3x3 conv2); shortcut of the strided
blocks: 2x2 average pool + 1x1 conv + BN (Keras ``same`` average pooling excludes the padding,
as PyTorch's ceil mode with count_include_pad=False); SE in stages 1-3; a plain spatial mean
("fast global average pooling") and a Dense head whose logits leave in float32.

Every conv has stride 1, so Keras ``same`` padding is PyTorch's symmetric ``k // 2``. Inplace-ABN
is computed as BatchNorm followed by LeakyReLU (its memory saving is not reproduced). The blur
filter is a constant, not a weight. Initialisation as the reference and the other engines:
kaiming normal (fan_out, gain sqrt(2)) convs, BN gamma 1 / beta 0 except the last BN of every
residual branch (gamma 0), classifier kernel normal(0, 0.01), biases uniform(+-1/sqrt(fan_in)).
"""

from __future__ import annotations

import math
from typing import Any

from bench_engine.api import UnsupportedError

TRESNET_M_LAYERS = (3, 4, 11, 3)
STEM_WIDTH = 64
BLOCK_SIZE = 4  # SpaceToDepth
STEM_SLOPE = 1e-2
BLOCK_SLOPE = 1e-3
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9  # Keras keeps momentum * old + (1 - momentum) * new: PyTorch's 0.1

_CUSTOM: dict[str, type] = {}


def _layers() -> dict[str, type]:
    """The parameter-free custom layers (SpaceToDepth, BlurPool), defined once keras is imported."""
    if _CUSTOM:
        return _CUSTOM
    import keras
    import numpy as np
    from keras import ops

    class SpaceToDepth(keras.layers.Layer):
        """N,H,W,C -> N,H/4,W/4,16C; channel (i * 4 + j) * C + c holds pixel (4y + i, 4x + j) of channel c."""

        def call(self, x: Any) -> Any:
            _, h, w, c = x.shape
            b = BLOCK_SIZE
            x = ops.reshape(x, (-1, h // b, b, w // b, b, c))
            x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
            return ops.reshape(x, (-1, h // b, w // b, b * b * c))

        def compute_output_shape(self, shape: tuple) -> tuple:
            return (shape[0], shape[1] // BLOCK_SIZE, shape[2] // BLOCK_SIZE, shape[3] * BLOCK_SIZE * BLOCK_SIZE)

    class BlurPool(keras.layers.Layer):
        """Anti-alias downsampling: reflect pad 1, fixed 3x3 [1,2,1]x[1,2,1]/16 depthwise filter, stride 2."""

        def call(self, x: Any) -> Any:
            taps = np.array([1.0, 2.0, 1.0], np.float32)
            kernel = np.tile((np.outer(taps, taps) / 16.0)[:, :, None, None], (1, 1, x.shape[-1], 1))  # (3, 3, C, 1)
            kernel = ops.cast(kernel, x.dtype)
            x = ops.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="reflect")
            return ops.depthwise_conv(x, kernel, strides=2, padding="valid")

        def compute_output_shape(self, shape: tuple) -> tuple:
            return (shape[0], (shape[1] - 1) // 2 + 1, (shape[2] - 1) // 2 + 1, shape[3])

    _CUSTOM.update(SpaceToDepth=SpaceToDepth, BlurPool=BlurPool)
    return _CUSTOM


def _conv_init() -> Any:
    import keras

    return keras.initializers.VarianceScaling(scale=2.0, mode="fan_out", distribution="untruncated_normal")


def _uniform_fan_in(fan_in: int) -> Any:
    """PyTorch's default bias init: uniform(+-1/sqrt(fan_in))."""
    import keras

    bound = 1.0 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-bound, bound)


def _conv_norm_act(x: Any, filters: int, kernel: int, slope: float | None, name: str, zero_gamma: bool = False) -> Any:
    """Conv (no bias, stride 1, same padding) + BN + optional LeakyReLU: Inplace-ABN, functionally."""
    import keras

    x = keras.layers.Conv2D(filters, kernel, padding="same", use_bias=False, kernel_initializer=_conv_init(),
                            name=f"{name}_conv")(x)
    x = keras.layers.BatchNormalization(axis=-1, momentum=BN_MOMENTUM, epsilon=BN_EPSILON,
                                        gamma_initializer="zeros" if zero_gamma else "ones", beta_initializer="zeros",
                                        name=f"{name}_bn")(x)
    if slope is not None:
        x = keras.layers.LeakyReLU(negative_slope=slope, name=f"{name}_act")(x)
    return x


def _squeeze_excite(x: Any, reduced: int, name: str) -> Any:
    """Spatial mean, 1x1 conv (bias) to ``reduced``, ReLU, 1x1 conv (bias) back, sigmoid gate."""
    import keras

    channels = x.shape[-1]
    gate = keras.layers.GlobalAveragePooling2D(keepdims=True, name=f"{name}_pool")(x)
    gate = keras.layers.Conv2D(reduced, 1, use_bias=True, kernel_initializer=_conv_init(),
                               bias_initializer=_uniform_fan_in(channels), name=f"{name}_fc1")(gate)
    gate = keras.layers.ReLU(name=f"{name}_relu")(gate)
    gate = keras.layers.Conv2D(channels, 1, use_bias=True, kernel_initializer=_conv_init(),
                               bias_initializer=_uniform_fan_in(reduced), activation="sigmoid", name=f"{name}_fc2")(gate)
    return keras.layers.Multiply(name=f"{name}_scale")([x, gate])


def _block(x: Any, planes: int, stride: int, use_se: bool, bottleneck: bool, name: str) -> Any:
    import keras

    custom = _layers()
    out_width = planes * (4 if bottleneck else 1)
    shortcut = x
    if stride != 1 or x.shape[-1] != out_width:
        if stride == 2:
            shortcut = keras.layers.AveragePooling2D(2, strides=2, padding="same", name=f"{name}_down_pool")(shortcut)
        shortcut = _conv_norm_act(shortcut, out_width, 1, None, f"{name}_down")
    if bottleneck:
        out = _conv_norm_act(x, planes, 1, BLOCK_SLOPE, f"{name}_conv1")
        out = _conv_norm_act(out, planes, 3, BLOCK_SLOPE, f"{name}_conv2")
        if stride == 2:
            out = custom["BlurPool"](name=f"{name}_aa")(out)
        if use_se:
            out = _squeeze_excite(out, max(planes * 4 // 8, 64), f"{name}_se")
        out = _conv_norm_act(out, out_width, 1, None, f"{name}_conv3", zero_gamma=True)
    else:
        out = _conv_norm_act(x, planes, 3, BLOCK_SLOPE, f"{name}_conv1")
        if stride == 2:
            out = custom["BlurPool"](name=f"{name}_aa")(out)
        out = _conv_norm_act(out, planes, 3, None, f"{name}_conv2", zero_gamma=True)
        if use_se:
            out = _squeeze_excite(out, max(planes // 4, 64), f"{name}_se")
    out = keras.layers.Add(name=f"{name}_add")([out, shortcut])
    return keras.layers.ReLU(name=f"{name}_out")(out)


def tresnet(num_classes: int, input_shape: tuple[int, int, int], layers: tuple[int, ...] = TRESNET_M_LAYERS,
            width: int = STEM_WIDTH, name: str = "tresnet_m") -> Any:
    """A TResNet as a Keras functional model (built under the current dtype policy); logits in float32."""
    import keras

    height, width_px, _ = input_shape
    if height % BLOCK_SIZE or width_px % BLOCK_SIZE:
        raise UnsupportedError(f"tresnet_m needs height and width divisible by {BLOCK_SIZE} (SpaceToDepth), "
                               f"got {height}x{width_px}")
    custom = _layers()
    inputs = keras.Input(shape=input_shape, name="images")
    x = custom["SpaceToDepth"](name="s2d")(inputs)
    x = _conv_norm_act(x, width, 3, STEM_SLOPE, "stem")
    for stage, blocks in enumerate(layers):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            x = _block(x, width * 2 ** stage, stride, use_se=stage < 3, bottleneck=stage >= 2, name=f"layer{stage + 1}_{block}")
    channels = x.shape[-1]
    x = keras.layers.GlobalAveragePooling2D(name="avgpool")(x)  # fast global average pooling: a plain mean
    x = keras.layers.Dense(num_classes, kernel_initializer=keras.initializers.RandomNormal(0.0, 0.01),
                           bias_initializer=_uniform_fan_in(channels), name="fc")(x)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name=name)


def tresnet_m(num_classes: int, input_shape: tuple[int, int, int]) -> Any:
    """TResNet-M: layers (3, 4, 11, 3), 31,389,032 trainable parameters at 1000 classes."""
    return tresnet(num_classes, input_shape)
