"""TResNet-M in every engine: trainable parameters equal to orchestrator.model.layers and the published
count, ResNet-50 unchanged, the reference's layout and initialisation, and a forward pass.

References for the counts (at 224x224, 1000 classes):
- TResNet-M: 31,389,032 trainable parameters. timm's ``tresnet_m`` (the authors' model; model card
  https://huggingface.co/timm/tresnet_m.miil_in1k: "Params (M): 31.4, GMACs: 5.8"); the exact
  figure is asserted by osmr/imgclsmob, pytorch/pytorchcv/models/tresnet.py (``_test``:
  ``weight_count == 31389032`` for tresnet_m). The paper (arXiv:2003.13630, Table 1) gives
  5.5 GFLOPs (multiply-accumulates) for TResNet-M.
- ResNet-50 v1.5: 25,557,032 (torchvision ``resnet50``), 4.09 GMACs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.model.layers import forward_macs, tresnet_m_layers
from orchestrator.model.layers import trainable_parameters as analytic

TRESNET_M_PUBLISHED = 31_389_032
RESNET50_PUBLISHED = 25_557_032
TRESNET_M_MACS_224 = 5_736_545_792  # this layer list; timm's card rounds to 5.8 G, the paper says 5.5 G
RESNET50_MACS_224 = 4_089_184_256
CLASSES = (1000, 10)


def test_orchestrator_counts_match_the_published_references() -> None:
    assert analytic("tresnet_m", 1000) == TRESNET_M_PUBLISHED
    assert analytic("tresnet_m", 10) == TRESNET_M_PUBLISHED - 990 * 2049  # only the classifier changes
    assert analytic("resnet50_v1.5", 1000) == RESNET50_PUBLISHED
    assert analytic("resnet50_v1.5", 10) == 23_528_522
    assert forward_macs("resnet50_v1.5", 1000, 3, 224, 224) == RESNET50_MACS_224
    macs = forward_macs("tresnet_m", 1000, 3, 224, 224)
    assert macs == TRESNET_M_MACS_224
    assert 5.4e9 < macs < 5.9e9  # the paper's 5.5 G, timm's 5.8 G
    # the blur filter has no parameters; its MACs are counted (0.0016 G)
    blurs = [layer for layer in tresnet_m_layers(1000) if layer.kind == "blur"]
    assert len(blurs) == 3 and all(layer.params == 0 for layer in blurs)
    assert sum(layer.macs for layer in blurs) == 128 * 9 * 28 * 28 + 256 * 9 * 14 * 14 + 512 * 9 * 7 * 7


# ---------------------------------------------------------------------------------------------- PyTorch


@pytest.fixture(scope="module")
def torch_tresnet():
    torch = pytest.importorskip("torch")
    from bench_pytorch.model import build_model

    torch.manual_seed(0)
    return build_model("tresnet_m", 10)


def test_pytorch_counts() -> None:
    pytest.importorskip("torch")
    from bench_pytorch.model import build_model, trainable_parameters

    for classes in CLASSES:
        assert trainable_parameters(build_model("tresnet_m", classes)) == analytic("tresnet_m", classes)
        assert trainable_parameters(build_model("resnet50_v1.5", classes)) == analytic("resnet50_v1.5", classes)


def test_pytorch_layout_is_the_reference(torch_tresnet) -> None:
    import torch
    from torch import nn

    from bench_pytorch.tresnet import BasicBlock, BlurPool, Bottleneck

    model = torch_tresnet
    state = model.state_dict()
    assert state["conv1.conv.weight"].shape == (64, 48, 3, 3)  # SpaceToDepth: 3 x 16 channels in
    assert [len(getattr(model, f"layer{i}")) for i in (1, 2, 3, 4)] == [3, 4, 11, 3]
    assert all(isinstance(b, BasicBlock) for b in (*model.layer1, *model.layer2))
    assert all(isinstance(b, Bottleneck) for b in (*model.layer3, *model.layer4))
    # no strided conv: the first block of stages 2-4 blurs with stride 2 after its stride-1 conv
    assert all(m.stride == (1, 1) for m in model.modules() if isinstance(m, nn.Conv2d))
    blurs = [name for name, m in model.named_modules() if isinstance(m, BlurPool)]
    assert blurs == ["layer2.0.aa", "layer3.0.aa", "layer4.0.aa"]
    assert not any("filt" in name for name, _ in model.named_parameters())  # fixed, not trainable
    assert torch.allclose(model.layer2[0].aa.filt[0, 0], torch.tensor([[1.0, 2, 1], [2, 4, 2], [1, 2, 1]]) / 16)
    # shortcuts: 2x2 average pool (ceil mode, padding not counted) + 1x1 conv + BN
    pool = model.layer3[0].downsample[0]
    assert isinstance(pool, nn.AvgPool2d) and pool.ceil_mode and not pool.count_include_pad
    assert state["layer3.0.downsample.1.conv.weight"].shape == (1024, 128, 1, 1)
    assert state["layer4.0.downsample.1.conv.weight"].shape == (2048, 1024, 1, 1)
    assert model.layer1[0].downsample is None and model.layer3[1].downsample is None
    # SE: stages 1-3 only, the reference's reduction sizes
    assert state["layer1.0.se.fc1.weight"].shape == (64, 64, 1, 1)
    assert state["layer2.0.se.fc1.weight"].shape == (64, 128, 1, 1)
    assert state["layer3.0.se.fc1.weight"].shape == (128, 256, 1, 1)  # on the bottleneck width
    assert state["layer3.0.se.fc1.bias"].shape == (128,)
    assert all(block.se is None for block in model.layer4)
    # activations: LeakyReLU 0.01 in the stem, 1e-3 in the blocks, none after the last BN of a branch
    assert model.conv1.act.negative_slope == 1e-2
    assert model.layer3[0].conv2.act.negative_slope == 1e-3
    assert isinstance(model.layer3[0].conv3.act, nn.Identity) and isinstance(model.layer1[0].conv2.act, nn.Identity)
    assert state["fc.weight"].shape == (10, 2048)


def test_pytorch_initialisation_is_the_reference(torch_tresnet) -> None:
    import torch

    model = torch_tresnet
    for block in (*model.layer1, *model.layer2):
        assert torch.equal(block.conv2.bn.weight, torch.zeros(block.conv2.bn.num_features))
        assert torch.equal(block.conv1.bn.weight, torch.ones(block.conv1.bn.num_features))
    for block in (*model.layer3, *model.layer4):
        assert torch.equal(block.conv3.bn.weight, torch.zeros(block.conv3.bn.num_features))
    assert torch.equal(model.layer3[0].downsample[1].bn.weight, torch.ones(1024))
    std = float(model.layer3[0].conv2.conv.weight.detach().std())
    assert abs(std - math.sqrt(2 / (256 * 9))) < 0.002  # kaiming normal, fan_out
    assert abs(float(model.fc.weight.detach().std()) - 0.01) < 0.001


def test_pytorch_forward(torch_tresnet) -> None:
    import torch

    model = torch_tresnet
    x = torch.randn(2, 3, 32, 32)
    model.train()
    logits = model(x)
    assert logits.shape == (2, 10)
    logits.sum().backward()
    model.eval()
    with torch.no_grad():
        plain = model(x)
        nhwc = model.to(memory_format=torch.channels_last)(x.contiguous(memory_format=torch.channels_last))
    model.to(memory_format=torch.contiguous_format)
    assert torch.allclose(plain, nhwc, atol=1e-5)  # the channels-last SpaceToDepth path is the same function
    with pytest.raises(Exception, match="divisible by 4"):
        model(torch.zeros(1, 3, 30, 30))


# ---------------------------------------------------------------------------------------------- JAX


def _jax():
    jax = pytest.importorskip("jax")
    pytest.importorskip("flax")
    jax.config.update("jax_platforms", "cpu")
    return jax


def test_jax_counts() -> None:
    jax = _jax()
    import jax.numpy as jnp

    from bench_jax.model import build_model, count_parameters

    for arch in ("tresnet_m", "resnet50_v1.5"):
        for classes in CLASSES:
            model = build_model(arch, classes)
            shapes = jax.eval_shape(lambda k, m=model: m.init(k, jnp.zeros((1, 32, 32, 3)), train=False), jax.random.PRNGKey(0))
            assert count_parameters(shapes["params"]) == analytic(arch, classes), (arch, classes)


def test_jax_forward() -> None:
    jax = _jax()
    import jax.numpy as jnp

    from bench_jax.model import build_model

    model = build_model("tresnet_m", 10)
    x = jnp.ones((2, 32, 32, 3), jnp.float32)
    shapes = jax.eval_shape(lambda k: model.init(k, x[:1], train=False), jax.random.PRNGKey(0))
    variables = jax.tree_util.tree_map(lambda s: jnp.full(s.shape, 0.5, s.dtype), shapes)  # no RNG init: fast
    logits, updates = jax.jit(lambda v, x: model.apply(v, x, train=True, mutable=["batch_stats"]))(variables, x)
    assert logits.shape == (2, 10) and bool(jnp.all(jnp.isfinite(logits)))
    assert set(updates["batch_stats"]) == set(variables["batch_stats"])


# ---------------------------------------------------------------------------------------------- TensorFlow


def test_tensorflow_counts_and_forward() -> None:
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from bench_tensorflow.model import build_model, count_trainable

    keras.mixed_precision.set_global_policy("float32")
    for arch in ("tresnet_m", "resnet50_v1.5"):
        for classes in CLASSES:
            model = build_model(arch, classes, (32, 32, 3))
            assert count_trainable(model) == analytic(arch, classes), (arch, classes)
    model = build_model("tresnet_m", 10, (32, 32, 3))
    logits = model(np.ones((2, 32, 32, 3), np.float32), training=True)
    assert tuple(logits.shape) == (2, 10) and logits.dtype.name == "float32"
    # the blur filter is a constant: no weights at all, trainable or not
    assert not model.get_layer("layer2_0_aa").weights
    assert float(np.abs(model.get_layer("layer3_0_conv3_bn").gamma.numpy()).max()) == 0.0  # zero-init last BN
    assert float(np.abs(model.get_layer("layer2_0_conv2_bn").gamma.numpy()).max()) == 0.0
    assert float(model.get_layer("layer3_0_conv2_bn").gamma.numpy().min()) == 1.0
    with pytest.raises(Exception, match="divisible by 4"):
        build_model("tresnet_m", 10, (30, 30, 3))
