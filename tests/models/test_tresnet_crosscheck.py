"""The same TResNet in PyTorch, JAX and TensorFlow computes the same function.

A reduced-depth TResNet (layers 1, 1, 2, 1: every block kind, with and without SE, with and
without the pooled shortcut, full widths) is built in PyTorch with random BatchNorm statistics
and affine parameters (so no branch is silenced by the zero-initialised gammas); its weights are
copied into the JAX and TensorFlow models, which must give the same logits in inference and in
training mode (batch statistics). The input is 36x36, so the feature maps after the stem are 9x9
and every later one is odd or tiny: ceil-mode pooling, reflect padding and the blur's sampling
grid must all agree. Also checks that the JAX and TensorFlow initialisers zero the same gammas.
"""

from __future__ import annotations

import numpy as np
import pytest

LAYERS = (1, 1, 2, 1)
CLASSES = 7
SHAPE = (3, 36, 36, 3)  # N, H, W, C


def _canonical(key: str) -> tuple[tuple[str, ...], str]:
    """'layer2.0.downsample.1.conv.weight' -> (('layer2_0', 'downsample', 'conv'), 'weight')."""
    *modules, leaf = key.split(".")
    if modules[0] == "conv1":
        path = ["stem", *modules[1:]]
    elif modules[0] == "fc":
        path = ["fc"]
    else:
        rest = modules[2:]
        if rest[0] == "downsample":
            rest = ["downsample", *rest[2:]]  # drop the Sequential index (after the pool)
        path = [f"{modules[0]}_{modules[1]}", *rest]
    return tuple(path), leaf


@pytest.fixture(scope="module")
def reference():
    """(numpy NHWC input, torch eval logits, torch train logits, {canonical: numpy array})."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from bench_pytorch.tresnet import TResNet

    torch.manual_seed(1)
    model = TResNet(LAYERS, CLASSES)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.2)
                module.running_mean.normal_(0.0, 0.2)
                module.running_var.uniform_(0.5, 1.5)
        model.fc.weight.normal_(0.0, 0.1)
    weights = {_canonical(k): v.detach().numpy().copy() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    rng = np.random.default_rng(0)
    images = rng.standard_normal(SHAPE).astype(np.float32)
    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    with torch.no_grad():
        model.eval()
        infer = model(x).numpy()
        model.train()
        train = model(x).numpy()
    return images, infer, train, weights


def _close(got: np.ndarray, want: np.ndarray) -> None:
    scale = float(np.abs(want).max())
    assert scale > 1e-3  # a meaningful signal, not a silenced network
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-4 * scale)


def test_jax_matches_pytorch(reference) -> None:
    jax = pytest.importorskip("jax")
    pytest.importorskip("flax")
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp
    from jax import lax

    from bench_jax.tresnet import TResNet

    images, infer, train, weights = reference
    model = TResNet(layers=LAYERS, num_classes=CLASSES, precision=lax.Precision.HIGHEST)
    shapes = jax.eval_shape(lambda k: model.init(k, jnp.zeros((1, *SHAPE[1:])), train=False), jax.random.PRNGKey(0))
    params: dict = {}
    stats: dict = {}

    def put(tree: dict, path: tuple[str, ...], value: np.ndarray) -> None:
        for name in path[:-1]:
            tree = tree.setdefault(name, {})
        tree[path[-1]] = jnp.asarray(value)

    for (path, leaf), value in weights.items():
        if leaf == "weight" and value.ndim == 4:
            put(params, (*path, "kernel"), value.transpose(2, 3, 1, 0))  # OIHW -> HWIO
        elif leaf == "weight" and value.ndim == 2:
            put(params, (*path, "kernel"), value.T)
        elif leaf == "weight":
            put(params, (*path, "scale"), value)
        elif leaf == "bias":
            put(params, (*path, "bias"), value)
        elif leaf == "running_mean":
            put(stats, (*path, "mean"), value)
        elif leaf == "running_var":
            put(stats, (*path, "var"), value)
    variables = {"params": params, "batch_stats": stats}
    assert jax.tree_util.tree_structure(variables) == jax.tree_util.tree_structure(shapes)
    for got, want in zip(jax.tree_util.tree_leaves(variables), jax.tree_util.tree_leaves(shapes), strict=True):
        assert got.shape == want.shape
    x = jnp.asarray(images)
    _close(np.asarray(jax.jit(lambda v, x: model.apply(v, x, train=False))(variables, x)), infer)
    logits, _ = jax.jit(lambda v, x: model.apply(v, x, train=True, mutable=["batch_stats"]))(variables, x)
    _close(np.asarray(logits), train)

    # the initialiser zeroes the last BN of every residual branch, as in PyTorch
    initial = jax.jit(lambda k: model.init(k, jnp.zeros((1, *SHAPE[1:])), train=False))(jax.random.PRNGKey(0))["params"]
    for block, last in (("layer1_0", "conv2"), ("layer2_0", "conv2"), ("layer3_1", "conv3"), ("layer4_0", "conv3")):
        assert float(jnp.abs(initial[block][last]["bn"]["scale"]).max()) == 0.0
        assert float(jnp.min(initial[block]["conv1"]["bn"]["scale"])) == 1.0
    assert abs(float(jnp.std(initial["fc"]["kernel"])) - 0.01) < 0.002


def test_tensorflow_matches_pytorch(reference) -> None:
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")

    from bench_tensorflow.tresnet import tresnet

    images, infer, train, weights = reference
    keras.mixed_precision.set_global_policy("float32")
    model = tresnet(CLASSES, SHAPE[1:], layers=LAYERS)
    grouped: dict[str, dict[str, np.ndarray]] = {}
    for (path, leaf), value in weights.items():
        name = "_".join(path).replace("downsample", "down")
        grouped.setdefault(name, {})[leaf] = value
    assigned = set()
    for name, leaves in grouped.items():
        layer = model.get_layer(name)
        if "running_mean" in leaves:  # BatchNormalization
            layer.set_weights([leaves["weight"], leaves["bias"], leaves["running_mean"], leaves["running_var"]])
        elif leaves["weight"].ndim == 4:  # Conv2D
            kernel = leaves["weight"].transpose(2, 3, 1, 0)
            layer.set_weights([kernel, leaves["bias"]] if "bias" in leaves else [kernel])
        else:  # Dense
            layer.set_weights([leaves["weight"].T, leaves["bias"]])
        assigned.add(name)
    assert assigned == {layer.name for layer in model.layers if layer.weights}
    _close(np.asarray(model(images, training=False)), infer)
    _close(np.asarray(model(images, training=True)), train)

    initial = tresnet(CLASSES, SHAPE[1:], layers=LAYERS)
    for last in ("layer1_0_conv2_bn", "layer2_0_conv2_bn", "layer3_1_conv3_bn", "layer4_0_conv3_bn"):
        assert float(np.abs(initial.get_layer(last).gamma.numpy()).max()) == 0.0
    assert abs(float(np.std(initial.get_layer("fc").kernel.numpy())) - 0.01) < 0.002
