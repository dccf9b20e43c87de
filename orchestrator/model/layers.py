"""Models bench knows: analytic trainable-parameter counts (the parity reference) and FLOPs.

Each engine defines its models itself; the orchestrator checks every engine's reported count
against the count computed here from the architecture's layer list, and reports FLOPs next to
the measured speed. A model is a function ``(num_classes, channels, height, width) -> layers``;
each layer carries its trainable parameters and its forward multiply-accumulates (MACs) at that
input geometry. Papers' "FLOPs" (ResNet-50: 4.1 G at 224x224; TResNet-M: 5.5 G) are MACs; bench reports MACs and
FLOPs = 2 x MACs, and a training step as 3 x the forward FLOPs (forward, and a backward pass
that costs about twice the forward).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# (blocks, bottleneck width, output channels) per stage of ResNet-50
RESNET50_STAGES = ((3, 64, 256), (4, 128, 512), (6, 256, 1024), (3, 512, 2048))
# TResNet-M (Ridnik et al. 2020, timm's tresnet_m): (blocks, planes, block type, SE) per stage
TRESNET_M_STAGES = ((3, 64, "basic", True), (4, 128, "basic", True), (11, 256, "bottleneck", True), (3, 512, "bottleneck", False))
TRESNET_STEM_WIDTH = 64
SPACE_TO_DEPTH_BLOCK = 4
TRAIN_FLOPS_FACTOR = 3.0


@dataclass(frozen=True)
class Layer:
    """A parametrised layer: its trainable parameters and forward MACs per sample."""

    kind: str
    params: int
    macs: int = 0


def conv(cin: int, cout: int, k: int, hout: int, wout: int, groups: int = 1, bias: bool = False) -> Layer:
    weights = cin // groups * cout * k * k
    return Layer("conv", weights + (cout if bias else 0), weights * hout * wout)


def bn(c: int) -> Layer:
    return Layer("bn", 2 * c)


def dense(cin: int, cout: int) -> Layer:
    return Layer("dense", cin * cout + cout, cin * cout)


def out_size(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


def resnet50_layers(num_classes: int, in_channels: int = 3, height: int = 224, width: int = 224) -> list[Layer]:
    """ResNet-50 v1.5: 7x7/2 stem, 3x3/2 max pool, bottlenecks with the stride on the 3x3 conv."""
    h, w = out_size(height, 7, 2, 3), out_size(width, 7, 2, 3)
    layers = [conv(in_channels, 64, 7, h, w), bn(64)]
    h, w = out_size(h, 3, 2, 1), out_size(w, 3, 2, 1)
    cin = 64
    for stage, (blocks, width_, cout) in enumerate(RESNET50_STAGES):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            ho, wo = out_size(h, 3, stride, 1), out_size(w, 3, stride, 1)
            layers += [conv(cin, width_, 1, h, w), bn(width_), conv(width_, width_, 3, ho, wo), bn(width_),
                       conv(width_, cout, 1, ho, wo), bn(cout)]
            if block == 0:
                layers += [conv(cin, cout, 1, ho, wo), bn(cout)]
            cin, h, w = cout, ho, wo
    layers.append(dense(cin, num_classes))
    return layers


def blur(c: int, hout: int, wout: int) -> Layer:
    """The anti-alias filter: a fixed 3x3 depthwise blur (no trainable parameters), stride 2."""
    return Layer("blur", 0, c * 9 * hout * wout)


def squeeze_excite(c: int, reduced: int) -> list[Layer]:
    """SE: global average pool, 1x1 conv (bias) to ``reduced``, ReLU, 1x1 conv (bias) back, sigmoid gate."""
    return [conv(c, reduced, 1, 1, 1, bias=True), conv(reduced, c, 1, 1, 1, bias=True)]


def tresnet_m_layers(num_classes: int, in_channels: int = 3, height: int = 224, width: int = 224) -> list[Layer]:
    """TResNet-M as timm's ``tresnet_m`` (the authors' model with plain BatchNorm for Inplace-ABN).

    SpaceToDepth (block 4, no parameters) then a 3x3 conv to 64 at H/4; BasicBlocks in stages 1-2
    and Bottlenecks (expansion 4) in stages 3-4, layers (3, 4, 11, 3); no strided conv anywhere:
    the first block of stages 2-4 runs its 3x3 conv at stride 1 and then the fixed 3x3 blur with
    stride 2 (anti-alias downsampling), and its shortcut is a 2x2 average pool + 1x1 conv + BN.
    SE after the block's 3x3 conv(s) in stages 1-3: on the block output for BasicBlocks
    (reduced to max(planes / 4, 64)), on the bottleneck width for Bottlenecks (max(4 planes / 8, 64)).
    MACs count convs, SE and classifier, and the blur filter (0.0016 G at 224x224); not BN, pools
    or element-wise ops, as for ResNet-50.
    """
    h, w = height // SPACE_TO_DEPTH_BLOCK, width // SPACE_TO_DEPTH_BLOCK
    stem = TRESNET_STEM_WIDTH
    layers = [conv(in_channels * SPACE_TO_DEPTH_BLOCK ** 2, stem, 3, h, w), bn(stem)]
    cin = stem
    for stage, (blocks, planes, kind, se) in enumerate(TRESNET_M_STAGES):
        cout = planes * (1 if kind == "basic" else 4)
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            ho, wo = (-(-h // 2), -(-w // 2)) if stride == 2 else (h, w)  # ceil: reflect-padded blur / ceil-mode pool
            if block == 0 and (stride != 1 or cin != cout):
                layers += [conv(cin, cout, 1, ho, wo), bn(cout)]  # after the 2x2 average pool
            if kind == "basic":
                layers += [conv(cin, planes, 3, h, w), bn(planes)]
                if stride == 2:
                    layers.append(blur(planes, ho, wo))
                layers += [conv(planes, planes, 3, ho, wo), bn(planes)]
                if se:
                    layers += squeeze_excite(planes, max(planes // 4, 64))
            else:
                layers += [conv(cin, planes, 1, h, w), bn(planes), conv(planes, planes, 3, h, w), bn(planes)]
                if stride == 2:
                    layers.append(blur(planes, ho, wo))
                if se:
                    layers += squeeze_excite(planes, max(planes * 4 // 8, 64))
                layers += [conv(planes, cout, 1, ho, wo), bn(cout)]
            cin, h, w = cout, ho, wo
    layers.append(dense(cin, num_classes))
    return layers


MODELS: dict[str, Callable[..., list[Layer]]] = {
    "resnet50_v1.5": resnet50_layers,
    "tresnet_m": tresnet_m_layers,
}


def known_archs() -> list[str]:
    return sorted(MODELS)


def trainable_parameters(arch: str, num_classes: int, in_channels: int = 3) -> int | None:
    """The analytic trainable-parameter count, or None for an arch bench does not know."""
    build = MODELS.get(arch)
    if build is None:
        return None
    return sum(layer.params for layer in build(num_classes, in_channels))


def forward_macs(arch: str, num_classes: int, channels: int, height: int, width: int) -> int | None:
    """Forward multiply-accumulates per sample at this geometry (None for an unknown arch)."""
    build = MODELS.get(arch)
    if build is None:
        return None
    return sum(layer.macs for layer in build(num_classes, channels, height, width))


def flops_per_sample(arch: str, num_classes: int, channels: int, height: int, width: int, mode: str) -> float | None:
    """FLOPs of one sample's step: 2 x MACs forward, x3 for a training step."""
    macs = forward_macs(arch, num_classes, channels, height, width)
    if macs is None:
        return None
    return 2.0 * macs * (TRAIN_FLOPS_FACTOR if mode == "train" else 1.0)
