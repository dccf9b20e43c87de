"""BatchNorm folded into the convolutions for JAX inference (bench_jax.folding, on by default): the folded ResNet's logits are
the model's within rounding, its tree has no statistics, and a wrong fold is caught by the same comparison."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "jax"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

jax = pytest.importorskip("jax")
pytest.importorskip("flax")


@pytest.fixture(scope="module")
def model_and_variables():
    import jax.numpy as jnp

    from bench_jax.model import resnet50

    model = resnet50(10)
    variables = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)), train=False)
    key = iter(jax.random.split(jax.random.PRNGKey(1), 4096))

    def spread(tree, low, high):  # statistics and affine values away from their identity initial values
        return jax.tree.map(lambda leaf: jax.random.uniform(next(key), leaf.shape, leaf.dtype, low, high), tree)

    stats = jax.tree_util.tree_map_with_path(
        lambda path, leaf: jax.random.uniform(next(key), leaf.shape, leaf.dtype, 0.5, 2.0) if path[-1].key == "var"
        else jax.random.uniform(next(key), leaf.shape, leaf.dtype, -0.2, 0.2), variables["batch_stats"])
    params = jax.tree_util.tree_map_with_path(
        lambda path, leaf: spread(leaf, 0.5, 1.5) if path[-1].key == "scale" else
        (spread(leaf, -0.1, 0.1) if path[-1].key == "bias" and "fc" not in str(path[0]) else leaf), variables["params"])
    images = jax.random.uniform(next(key), (4, 32, 32, 3), jnp.float32, -1.0, 1.0)
    return model, {"params": params, "batch_stats": stats}, images


def _logits(model, variables, images, fold: bool):
    from bench_jax.model import resnet50

    if fold:
        return np.asarray(resnet50(10, fold_batchnorm=True).apply(variables, images, train=False))
    return np.asarray(model.apply(variables, images, train=False))


def test_the_folded_model_gives_the_models_logits(model_and_variables) -> None:
    from bench_jax.folding import fold_batchnorm
    from bench_jax.model import count_parameters

    model, variables, images = model_and_variables
    folded = fold_batchnorm(variables)
    assert set(folded) == {"params"} and "bn1" not in folded["params"] and "bias" in folded["params"]["conv1"]
    assert "downsample_bn" not in folded["params"]["layer1_0"] and "bias" in folded["params"]["layer1_0"]["downsample_conv"]
    assert count_parameters(folded) < count_parameters(variables["params"])  # a bias per channel for scale and shift
    reference = _logits(model, variables, images, fold=False)
    np.testing.assert_allclose(_logits(model, folded, images, fold=True), reference, rtol=2e-4, atol=2e-4)
    assert np.abs(reference).max() > 1e-2  # not a vacuous comparison


def test_a_wrong_fold_does_not_pass_the_comparison(model_and_variables) -> None:
    from bench_jax.folding import fold_batchnorm

    model, variables, images = model_and_variables
    reference = _logits(model, variables, images, fold=False)
    wrong = fold_batchnorm(variables, epsilon=0.1)  # the statistics folded with another epsilon
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(_logits(model, wrong, images, fold=True), reference, rtol=2e-4, atol=2e-4)


def test_a_tree_that_is_not_a_resnets_is_refused() -> None:
    import jax.numpy as jnp

    from bench_jax.folding import fold_batchnorm

    lonely = {"params": {"conv1": {"kernel": jnp.ones((1, 1, 3, 4))}}, "batch_stats": {}}
    with pytest.raises(ValueError, match="conv1: no BatchNorm bn1"):
        fold_batchnorm(lonely)
    with pytest.raises(ValueError, match="folded into its convolutions is for inference only"):
        from bench_jax.model import resnet50

        resnet50(10, fold_batchnorm=True).init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)), train=True)


def test_an_inference_run_folds_by_default_and_training_refuses_the_option(make_spec, run_engine) -> None:
    from tests.engine_outcomes import expect_failed

    spec = make_spec("jax", mode="infer", batch=8, steps_per_epoch=3)
    code, result, log = run_engine(spec)
    assert code == 0, log
    switch = result["work"]["optimizations"]["batchnorm_folded"]
    assert switch["applied"] is True and switch["detail"].startswith("auto:") and "gamma/sqrt(var+eps)" in switch["detail"]
    assert result["work"]["trainable_parameters"] == spec["expected"]["trainable_parameters"]  # the model as defined
    off = make_spec("jax", mode="infer", batch=8, steps_per_epoch=3, options={"fold_batchnorm": False})
    assert run_engine(off)[1]["work"]["optimizations"]["batchnorm_folded"] == {"applied": False, "detail": "option: BatchNorm kept as its own op"}
    failed = expect_failed(run_engine, make_spec("jax", batch=8, steps_per_epoch=1, options={"fold_batchnorm": True}), "unsupported")
    assert "inference only" in failed["failure"]["message"]


def test_auto_folds_only_the_optimized_one_device_resnet50_inference() -> None:
    from types import SimpleNamespace

    from bench_jax.folding import folded_inference

    def switch(option, optimized=True, mode="infer", arch="resnet50_v1.5", devices=1):
        parity = SimpleNamespace(mode=mode, arch=arch, devices=devices)
        return folded_inference(option, optimized, parity, model=None, state=None)[2]  # no fold reaches the model

    assert switch("auto", optimized=False).detail == "auto: BatchNorm kept as its own op (baseline)"
    assert switch("auto", mode="train").detail.startswith("training:")
    assert switch("auto", arch="tresnet_m").detail == "auto: folds bench's ResNet-50 on one device, not tresnet_m on 1"
    assert not switch("auto", devices=2).applied
    assert not switch(False).applied
    from bench_engine.api import UnsupportedError

    with pytest.raises(UnsupportedError, match="not tresnet_m on 1"):
        switch(True, arch="tresnet_m")
    with pytest.raises(UnsupportedError, match="inference only"):
        switch(True, optimized=False, mode="train")
