"""Each engine's optimizer is torch's: the same weights and gradients give the same updated weights after a few steps.

Tiny tensors, so the comparison isolates the update rule (coupled L2, momentum / Adam bias correction, eps placement)
from the network. A row of gradients near 1e-8 makes eps matter: Keras's built-in Adam (eps on the uncorrected sqrt(v)) fails here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.engines.readback_helpers import add_paths

SETTINGS = {
    "sgd": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-2, "nesterov": False},
    "nesterov": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 0.0, "nesterov": True},
    "adam": {"name": "adam", "lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 1e-2},
}
STEPS = 4


def _problem() -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(3, 4)).astype(np.float32)
    grads = [(rng.normal(size=(3, 4)) * scale).astype(np.float32) for scale in (1.0, 1e-3, 0.5, 1e-2)]
    for grad in grads:
        grad[0] *= 1e-8  # a row whose gradients stay near eps: where Adam's eps goes decides its step
    return weights, grads


def _torch(settings: dict[str, Any]) -> np.ndarray:
    add_paths("pytorch")
    import torch

    from bench_pytorch.optimizer import OptimizerSettings, make_optimizer

    weights, grads = _problem()
    module = torch.nn.Linear(4, 3, bias=False)
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(weights))
    optimizer = make_optimizer(module.parameters(), OptimizerSettings.from_spec(settings), fused=False, capturable=False)
    for grad in grads[:STEPS]:
        module.weight.grad = torch.from_numpy(grad.copy())
        optimizer.step()
    return module.weight.detach().numpy()


def _jax(settings: dict[str, Any]) -> np.ndarray:
    add_paths("jax")
    import jax.numpy as jnp
    import optax

    from bench_jax.readback import make_tx

    weights, grads = _problem()
    tx = make_tx(settings)
    params = {"w": jnp.asarray(weights)}
    state = tx.init(params)
    for grad in grads[:STEPS]:
        updates, state = tx.update({"w": jnp.asarray(grad)}, state, params)
        params = optax.apply_updates(params, updates)
    return np.asarray(params["w"])


def _tensorflow(settings: dict[str, Any]) -> np.ndarray:
    add_paths("tensorflow")
    import keras
    import tensorflow as tf

    from bench_tensorflow.optimizer import make_sgd
    from bench_tensorflow.readback import make_adam

    weights, grads = _problem()
    variable = tf.Variable(weights)
    if settings["name"] == "adam":
        optimizer = make_adam(keras, settings["lr"], settings["betas"], settings["eps"], settings["weight_decay"])
    else:
        optimizer = make_sgd(keras, settings["lr"], settings["momentum"], settings["nesterov"], settings["weight_decay"])
    optimizer.build([variable])
    for grad in grads[:STEPS]:
        optimizer.apply([tf.convert_to_tensor(grad)], [variable])
    return variable.numpy()


@pytest.mark.parametrize("name", sorted(SETTINGS))
@pytest.mark.parametrize("engine", ["jax", "tensorflow"])
def test_update_matches_torch(engine: str, name: str) -> None:
    expected = _torch(SETTINGS[name])
    got = {"jax": _jax, "tensorflow": _tensorflow}[engine](SETTINGS[name])
    assert np.abs(expected - _problem()[0]).max() > 1e-3  # the steps moved the weights
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-7)
