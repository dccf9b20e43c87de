"""TResNet-M (Ridnik et al., "TResNet: High Performance GPU-Dedicated Architecture", 2020) by hand.

Layer for layer as timm's ``tresnet_m`` (the authors' model, timm's BatchNorm port of it):

- stem: SpaceToDepth (block 4: N,C,H,W -> N,16C,H/4,W/4, channel order (row in block, column in
  block, channel)), then a 3x3 conv 48 -> 64 + BN + LeakyReLU(0.01);
- stages of BasicBlocks (1, 2) and Bottlenecks (3, 4, expansion 4), layers (3, 4, 11, 3), planes
  64/128/256/512; inside the blocks the activations are LeakyReLU(1e-3), the last BN of the branch
  has no activation and the residual sum goes through a ReLU;
- anti-alias downsampling: no strided conv anywhere. The first block of stages 2-4 runs the conv
  that would carry the stride (BasicBlock: conv1; Bottleneck: the 3x3 conv2) at stride 1, with its
  BN and activation, then a fixed, non-trainable 3x3 depthwise blur [1,2,1]x[1,2,1]/16 with
  stride 2 on a reflect-padded input (padding 1);
- the shortcut of those blocks: 2x2 average pool (stride 2, ceil mode, padding not counted) +
  1x1 conv + BN;
- SE in stages 1-3: after conv2 on the block output for BasicBlocks (reduced to
  max(planes / 4, 64)); after the 3x3 conv2, on the bottleneck width, before conv3 for
  Bottlenecks (reduced to max(4 planes / 8, 64)); 1x1 convs with bias, ReLU, sigmoid gate;
- head: "fast" global average pooling (a plain mean over the spatial positions) and a Linear.

Inplace-ABN (BatchNorm and activation fused in one in-place op) is functionally BatchNorm followed
by LeakyReLU; frameworks have no in-place ABN, so bench computes exactly that and does not
reproduce Inplace-ABN's memory saving (the paper credits it with ~200 images of maximal batch).

Initialisation (the reference's): kaiming normal (fan_out, gain sqrt(2)) for every conv, BN
gamma 1 and beta 0 except the last BN of every residual branch, whose gamma starts at 0 (so each
block starts as its shortcut); classifier weight normal(0, 0.01); biases (SE convs, classifier)
keep PyTorch's default uniform(+-1/sqrt(fan_in)). The JAX and TensorFlow engines apply the same.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bench_engine.api import UnsupportedError

TRESNET_M_LAYERS = (3, 4, 11, 3)
STEM_WIDTH = 64
BLOCK_SIZE = 4  # SpaceToDepth
STEM_SLOPE = 1e-2  # LeakyReLU of the stem (reference: InplaceABN's default activation_param)
BLOCK_SLOPE = 1e-3  # LeakyReLU inside the residual blocks (reference: activation_param=1e-3)
BN_EPS = 1e-5
BN_MOMENTUM = 0.1


class SpaceToDepth(nn.Module):
    """N,C,H,W -> N,16C,H/4,W/4; output channel (i * 4 + j) * C + c takes pixel (4y + i, 4x + j) of channel c."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        if h % BLOCK_SIZE or w % BLOCK_SIZE:
            raise UnsupportedError(f"tresnet_m needs height and width divisible by {BLOCK_SIZE} (SpaceToDepth), got {h}x{w}")
        b = BLOCK_SIZE
        if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
            # NHWC storage: rearrange the NHWC view, hand back a channels-last NCHW tensor
            y = x.permute(0, 2, 3, 1).reshape(n, h // b, b, w // b, b, c).permute(0, 1, 3, 2, 4, 5)
            return y.reshape(n, h // b, w // b, b * b * c).permute(0, 3, 1, 2)
        y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
        return y.reshape(n, b * b * c, h // b, w // b)


class BlurPool(nn.Module):
    """Anti-alias downsampling: reflect pad 1, fixed 3x3 [1,2,1]x[1,2,1]/16 depthwise filter, stride 2."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        taps = torch.tensor([1.0, 2.0, 1.0])
        kernel = (taps[:, None] * taps[None, :]) / 16.0
        # a buffer, not a parameter: moves with the model (device, memory format), never trained or saved
        self.register_buffer("filt", kernel[None, None].repeat(channels, 1, 1, 1), persistent=False)
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, (1, 1, 1, 1), mode="reflect")
        return F.conv2d(x, self.filt.to(x.dtype), stride=2, groups=self.channels)


class ConvNormAct(nn.Module):
    """Conv (no bias, 'same' padding, stride 1) + BatchNorm + optional LeakyReLU: Inplace-ABN without the in-place."""

    def __init__(self, cin: int, cout: int, kernel: int, slope: float | None) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.act: nn.Module = nn.LeakyReLU(slope, inplace=True) if slope is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class SqueezeExcite(nn.Module):
    """Global mean, 1x1 conv (bias) to ``reduced``, ReLU, 1x1 conv (bias) back, sigmoid, scale the input."""

    def __init__(self, channels: int, reduced: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, reduced, 1, bias=True)
        self.fc2 = nn.Conv2d(reduced, channels, 1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.fc2(F.relu(self.fc1(x.mean((2, 3), keepdim=True))))
        return x * torch.sigmoid(gate)


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module | None:
    """The reference's downsample: [2x2 average pool (ceil mode, padding not counted)] + 1x1 conv + BN."""
    if stride == 1 and cin == cout:
        return None
    layers: list[nn.Module] = []
    if stride == 2:
        layers.append(nn.AvgPool2d(2, stride=2, ceil_mode=True, count_include_pad=False))
    layers.append(ConvNormAct(cin, cout, 1, None))
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """3x3 (+ blur when strided) -> 3x3 (BN, no activation) -> SE -> + shortcut -> ReLU."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int, use_se: bool) -> None:
        super().__init__()
        self.conv1 = ConvNormAct(cin, planes, 3, BLOCK_SLOPE)
        self.aa = BlurPool(planes) if stride == 2 else None
        self.conv2 = ConvNormAct(planes, planes, 3, None)
        self.se = SqueezeExcite(planes, max(planes * self.expansion // 4, 64)) if use_se else None
        self.downsample = _shortcut(cin, planes * self.expansion, stride)
        self.act = nn.ReLU(inplace=True)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.conv2.bn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.conv1(x)
        if self.aa is not None:
            out = self.aa(out)
        out = self.conv2(out)
        if self.se is not None:
            out = self.se(out)
        return self.act(out + shortcut)


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (+ blur when strided) -> SE -> 1x1 expand x4 (BN, no activation) -> + shortcut -> ReLU."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, use_se: bool) -> None:
        super().__init__()
        self.conv1 = ConvNormAct(cin, planes, 1, BLOCK_SLOPE)
        self.conv2 = ConvNormAct(planes, planes, 3, BLOCK_SLOPE)
        self.aa = BlurPool(planes) if stride == 2 else None
        self.se = SqueezeExcite(planes, max(planes * self.expansion // 8, 64)) if use_se else None
        self.conv3 = ConvNormAct(planes, planes * self.expansion, 1, None)
        self.downsample = _shortcut(cin, planes * self.expansion, stride)
        self.act = nn.ReLU(inplace=True)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.conv3.bn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.conv2(self.conv1(x))
        if self.aa is not None:
            out = self.aa(out)
        if self.se is not None:
            out = self.se(out)
        out = self.conv3(out)
        return self.act(out + shortcut)


class TResNet(nn.Module):
    """SpaceToDepth stem, BasicBlock/BasicBlock/Bottleneck/Bottleneck stages, mean pool, Linear."""

    def __init__(self, layers: tuple[int, ...], num_classes: int, in_channels: int = 3, width: int = STEM_WIDTH) -> None:
        super().__init__()
        self.s2d = SpaceToDepth()
        self.conv1 = ConvNormAct(in_channels * BLOCK_SIZE * BLOCK_SIZE, width, 3, STEM_SLOPE)
        kinds = (BasicBlock, BasicBlock, Bottleneck, Bottleneck)
        cin = width
        stages = []
        for index, (blocks, block) in enumerate(zip(layers, kinds, strict=True)):
            planes = width * 2 ** index
            stride = 1 if index == 0 else 2
            use_se = index < 3
            stage = []
            for b in range(blocks):
                stage.append(block(cin, planes, stride if b == 0 else 1, use_se))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(cin, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="leaky_relu")  # a=0: gain sqrt(2)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        for module in self.modules():
            if isinstance(module, (BasicBlock, Bottleneck)):
                nn.init.zeros_(module.last_bn().weight)  # each residual branch starts at zero
        nn.init.normal_(self.fc.weight, 0.0, 0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.s2d(x))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(x.mean((2, 3)))  # fast global average pooling: a plain mean, no adaptive pool


def tresnet_m(num_classes: int, in_channels: int = 3) -> nn.Module:
    """TResNet-M: layers (3, 4, 11, 3), 31,389,032 trainable parameters at 1000 classes."""
    return TResNet(TRESNET_M_LAYERS, num_classes, in_channels)
