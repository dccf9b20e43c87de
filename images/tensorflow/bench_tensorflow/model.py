"""Models of the TensorFlow engine, built by hand from Keras layers (NHWC).

ResNet-50 v1.5 follows torchvision's ``resnet50`` exactly: 7x7/2 stem conv, 3x3/2 max pool,
bottleneck blocks whose 3x3 conv carries the stride, no conv bias, a 1x1 projection + BN
shortcut on the first block of each stage, global average pool and a biased classifier.
Padding is explicit (``ZeroPadding2D`` + ``valid``) wherever a stride is involved, so the
sampling grid is PyTorch's and not Keras's asymmetric ``same``; stride-1 3x3 convs use
``same``, which pads 1 on every side and is therefore identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bench_engine.api import UnsupportedError
from bench_tensorflow.tresnet import tresnet_m

# (blocks, bottleneck width) per stage; the stage's output has 4 x width channels
RESNET50_STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))
EXPANSION = 4
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9  # Keras keeps momentum * old + (1 - momentum) * new: PyTorch's 0.1


def _conv_init() -> Any:
    """Kaiming normal, fan_out, ReLU gain: torchvision's ResNet conv init."""
    import keras

    return keras.initializers.VarianceScaling(scale=2.0, mode="fan_out", distribution="untruncated_normal")


def _conv(x: Any, filters: int, kernel: int, stride: int, name: str) -> Any:
    """A bias-free conv with PyTorch padding ``kernel // 2`` (explicit when strided)."""
    import keras

    pad = kernel // 2
    padding = "valid"
    if pad and stride > 1:
        x = keras.layers.ZeroPadding2D(pad, name=f"{name}_pad")(x)
    elif pad:
        padding = "same"  # stride 1, odd kernel: exactly ``pad`` on every side
    return keras.layers.Conv2D(
        filters, kernel, strides=stride, padding=padding, use_bias=False, kernel_initializer=_conv_init(), name=name
    )(x)


def _bn(x: Any, name: str) -> Any:
    import keras

    return keras.layers.BatchNormalization(
        axis=-1, momentum=BN_MOMENTUM, epsilon=BN_EPSILON, gamma_initializer="ones", beta_initializer="zeros", name=name
    )(x)


def _bottleneck(x: Any, width: int, stride: int, project: bool, name: str) -> Any:
    """1x1 reduce, 3x3 (stride here: v1.5), 1x1 expand; residual add, then ReLU."""
    import keras

    shortcut = x
    if project:
        shortcut = _conv(x, width * EXPANSION, 1, stride, f"{name}_down_conv")
        shortcut = _bn(shortcut, f"{name}_down_bn")
    y = _conv(x, width, 1, 1, f"{name}_conv1")
    y = keras.layers.ReLU(name=f"{name}_relu1")(_bn(y, f"{name}_bn1"))
    y = _conv(y, width, 3, stride, f"{name}_conv2")
    y = keras.layers.ReLU(name=f"{name}_relu2")(_bn(y, f"{name}_bn2"))
    y = _conv(y, width * EXPANSION, 1, 1, f"{name}_conv3")
    y = _bn(y, f"{name}_bn3")
    y = keras.layers.Add(name=f"{name}_add")([y, shortcut])
    return keras.layers.ReLU(name=f"{name}_out")(y)


def resnet50_v15(num_classes: int, input_shape: tuple[int, int, int]) -> Any:
    """ResNet-50 v1.5 as a Keras functional model; logits come out in float32."""
    import keras

    inputs = keras.Input(shape=input_shape, name="images")
    x = keras.layers.ZeroPadding2D(3, name="stem_pad")(inputs)
    x = keras.layers.Conv2D(
        64, 7, strides=2, padding="valid", use_bias=False, kernel_initializer=_conv_init(), name="stem_conv"
    )(x)
    x = keras.layers.ReLU(name="stem_relu")(_bn(x, "stem_bn"))
    # zero padding equals PyTorch's -inf padding here: the inputs are ReLU outputs (>= 0)
    x = keras.layers.ZeroPadding2D(1, name="pool_pad")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, padding="valid", name="stem_pool")(x)
    channels = 64
    for stage, (blocks, width) in enumerate(RESNET50_STAGES, start=1):
        for block in range(blocks):
            stride = 2 if stage > 1 and block == 0 else 1
            project = block == 0 and (stride != 1 or channels != width * EXPANSION)
            x = _bottleneck(x, width, stride, project, f"layer{stage}_{block}")
            channels = width * EXPANSION
    x = keras.layers.GlobalAveragePooling2D(name="avgpool")(x)
    bound = 1.0 / math.sqrt(channels)  # torch.nn.Linear's default init
    uniform = keras.initializers.RandomUniform(-bound, bound)
    x = keras.layers.Dense(num_classes, kernel_initializer=uniform, bias_initializer=uniform, name="fc")(x)
    # under a mixed policy the classifier computes in the low precision; the logits leave in float32
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="resnet50_v1.5")


ModelBuilder = Callable[[int, tuple[int, int, int]], Any]

MODELS: dict[str, ModelBuilder] = {
    "resnet50_v1.5": resnet50_v15,
    "tresnet_m": tresnet_m,  # bench_tensorflow/tresnet.py
}


def build_model(arch: str, num_classes: int, input_shape: tuple[int, int, int]) -> Any:
    """Build ``arch`` (under the current Keras dtype policy); UnsupportedError when unknown."""
    builder = MODELS.get(arch)
    if builder is None:
        raise UnsupportedError(f"model {arch!r} is not available in the TensorFlow engine (known: {', '.join(sorted(MODELS))})")
    return builder(num_classes, input_shape)


def count_trainable(model: Any) -> int:
    """Number of trainable scalars of ``model``."""
    return int(sum(math.prod(int(d) for d in v.shape) for v in model.trainable_weights))
