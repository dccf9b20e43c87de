"""Models defined by hand (no torchvision): ResNet-50 v1.5, TResNet-M (tresnet.py) and a registry of architectures."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from bench_engine.api import UnsupportedError
from bench_pytorch.tresnet import tresnet_m

# (blocks, bottleneck width, output channels) per stage, as in orchestrator/model/layers.py
RESNET50_STAGES = ((3, 64, 256), (4, 128, 512), (6, 256, 1024), (3, 512, 2048))
BN_EPS = 1e-5
BN_MOMENTUM = 0.1  # PyTorch convention: running = (1 - m) * running + m * batch


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride: v1.5), 1x1 expand; projection shortcut when shapes change."""

    def __init__(self, cin: int, width: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = _bn(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = _bn(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = _bn(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), _bn(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """ResNet with torchvision's layout: stem, four bottleneck stages, global average pool, fc."""

    def __init__(self, stages: tuple[tuple[int, int, int], ...], num_classes: int, in_channels: int = 3) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = _bn(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = 64
        layers = []
        for index, (blocks, width, cout) in enumerate(stages):
            stride = 1 if index == 0 else 2
            blocks_list = [Bottleneck(cin if b == 0 else cout, width, cout, stride if b == 0 else 1) for b in range(blocks)]
            layers.append(nn.Sequential(*blocks_list))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        # fc keeps PyTorch's default nn.Linear initialisation, as torchvision does.

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50_v15(num_classes: int, in_channels: int = 3) -> nn.Module:
    """ResNet-50 v1.5 (stride on the 3x3 conv of the bottleneck)."""
    return ResNet(RESNET50_STAGES, num_classes, in_channels)


ARCHS: dict[str, Callable[[int, int], nn.Module]] = {
    "resnet50_v1.5": resnet50_v15,
    "tresnet_m": tresnet_m,
}


def build_model(arch: str, num_classes: int, in_channels: int = 3) -> nn.Module:
    """Build ``arch`` from the registry; an arch the engine does not define is unsupported."""
    builder = ARCHS.get(arch)
    if builder is None:
        raise UnsupportedError(f"pytorch engine has no model {arch!r} (known: {', '.join(sorted(ARCHS))})")
    return builder(num_classes, in_channels)


def trainable_parameters(model: nn.Module) -> int:
    """Number of parameters the optimizer updates."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
