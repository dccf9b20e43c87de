"""Models bench knows: their analytic trainable-parameter counts (the parity reference).

Each engine defines its models itself; the orchestrator checks every engine's reported count
against the count computed here from the architecture's layer list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# (blocks, bottleneck width, output channels) per stage of ResNet-50
RESNET50_STAGES = ((3, 64, 256), (4, 128, 512), (6, 256, 1024), (3, 512, 2048))


@dataclass(frozen=True)
class Layer:
    """A parametrised layer: conv (no bias), batch norm or dense."""

    kind: str
    params: int


def _conv(cin: int, cout: int, k: int) -> Layer:
    return Layer("conv", cin * cout * k * k)


def _bn(c: int) -> Layer:
    return Layer("bn", 2 * c)


def resnet50_layers(num_classes: int, in_channels: int = 3) -> list[Layer]:
    """ResNet-50 v1.5: 7x7 stem, bottlenecks with the stride on the 3x3 conv, no conv bias."""
    layers = [_conv(in_channels, 64, 7), _bn(64)]
    cin = 64
    for blocks, width, cout in RESNET50_STAGES:
        for block in range(blocks):
            layers += [_conv(cin, width, 1), _bn(width), _conv(width, width, 3), _bn(width), _conv(width, cout, 1), _bn(cout)]
            if block == 0:
                layers += [_conv(cin, cout, 1), _bn(cout)]
            cin = cout
    layers.append(Layer("dense", cin * num_classes + num_classes))
    return layers


MODELS: dict[str, Callable[[int, int], list[Layer]]] = {
    "resnet50_v1.5": resnet50_layers,
}


def known_archs() -> list[str]:
    return sorted(MODELS)


def trainable_parameters(arch: str, num_classes: int, in_channels: int = 3) -> int | None:
    """The analytic trainable-parameter count, or None for an arch bench does not know."""
    build = MODELS.get(arch)
    if build is None:
        return None
    return sum(layer.params for layer in build(num_classes, in_channels))
