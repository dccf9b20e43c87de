"""The training optimizer: Keras SGD with PyTorch's coupled L2, or Adam as torch.optim.Adam; loss-scaled under fp16.

Weight decay is coupled L2 (``g + wd * w`` before momentum), as in PyTorch's SGD.
"""

from __future__ import annotations

from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.contract import Parity
from bench_engine.precision import precision_info
from bench_tensorflow.readback import make_adam


def make_sgd(keras: Any, lr: float, momentum: float, nesterov: bool, weight_decay: float) -> Any:
    """Keras SGD with PyTorch's coupled L2: every gradient gets ``+ weight_decay * w`` first."""
    from keras import ops

    class CoupledL2SGD(keras.optimizers.SGD):
        """SGD whose ``update_step`` adds ``l2 * variable`` to the (unscaled) gradient."""

        def __init__(self, l2: float, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.l2 = float(l2)

        def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
            if self.l2:
                gradient = ops.add(ops.cast(gradient, variable.dtype), ops.multiply(variable, ops.cast(self.l2, variable.dtype)))
            super().update_step(gradient, variable, learning_rate)

    return CoupledL2SGD(l2=weight_decay, learning_rate=float(lr), momentum=float(momentum), nesterov=bool(nesterov))


def build_optimizer(keras: Any, parity: Parity, variables: list[Any]) -> tuple[Any, bool]:
    """(optimizer, loss scaling): the spec's SGD or Adam, in a LossScaleOptimizer for fp16, built for ``variables``."""
    opt = parity.optimizer
    if opt["name"] == "adam":
        optimizer = make_adam(keras, opt["lr"], opt["betas"], opt["eps"], opt["weight_decay"])
    elif opt["name"] == "sgd":
        optimizer = make_sgd(keras, opt["lr"], opt["momentum"], opt["nesterov"], opt["weight_decay"])
    else:
        raise UnsupportedError(f"optimizer {opt['name']!r} is not implemented")
    if precision_info(parity.precision).loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(variables)
    return optimizer, isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
