"""What the TensorFlow engine reports about itself, read from its live objects (docs/engine-contract.md).

Adam follows torch.optim.Adam exactly (eps added to the bias-corrected sqrt(v)); Keras's own Adam
adds eps to the uncorrected sqrt(v), an effective eps / sqrt(1 - beta_2^t), so the update step is
overridden. Weight decay is coupled L2 for both optimizers. Shared initial weights are assigned
layer by layer (conv OIHW -> HWIO, dense [out, in] -> [in, out], BN gamma/beta/moving mean/variance)
and hashed after reading the variables back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench_engine.initweights import InitError, canonical_sha256, read_init
from bench_engine.report import LossReadback, Observed, OptimizerReadback, Traced

BN_ORDER = ("weight", "bias", "running_mean", "running_var")  # keras: gamma, beta, moving_mean, moving_variance


def make_adam(keras: Any, lr: float, betas: list[float], eps: float, weight_decay: float) -> Any:
    """Keras Adam with torch.optim.Adam's update and coupled L2."""
    from keras import ops

    class TorchAdam(keras.optimizers.Adam):
        """``w -= lr * m_hat / (sqrt(v_hat) + eps)`` after ``g += l2 * w``."""

        def __init__(self, l2: float, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.l2 = float(l2)

        def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
            dtype = variable.dtype
            lr = ops.cast(learning_rate, dtype)
            gradient = ops.cast(gradient, dtype)
            if self.l2:
                gradient = ops.add(gradient, ops.multiply(variable, ops.cast(self.l2, dtype)))
            step = ops.cast(self.iterations + 1, dtype)
            b1, b2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
            m = self._momentums[self._get_variable_index(variable)]
            v = self._velocities[self._get_variable_index(variable)]
            self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - b1))
            self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - b2))
            m_hat = ops.divide(m, 1 - ops.power(b1, step))
            v_hat = ops.divide(v, 1 - ops.power(b2, step))
            self.assign_sub(variable, ops.divide(ops.multiply(m_hat, lr), ops.add(ops.sqrt(v_hat), ops.cast(self.epsilon, dtype))))

    return TorchAdam(l2=weight_decay, learning_rate=float(lr), beta_1=float(betas[0]), beta_2=float(betas[1]), epsilon=float(eps))


def optimizer_readback(keras: Any, optimizer: Any) -> OptimizerReadback:
    """Hyper-parameters from the optimizer object (the inner one under fp16 loss scaling)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    adam = isinstance(inner, keras.optimizers.Adam)
    value = lambda v: float(np.asarray(v.numpy() if hasattr(v, "numpy") else v))  # noqa: E731
    return OptimizerReadback(
        name="adam" if adam else "sgd" if isinstance(inner, keras.optimizers.SGD) else type(inner).__name__.lower(),
        class_=f"{type(inner).__module__}.{type(inner).__qualname__}",
        lr=value(inner.learning_rate),
        weight_decay=float(getattr(inner, "l2", 0.0) or 0.0) + float(inner.weight_decay or 0.0),
        momentum=None if adam else value(inner.momentum),
        nesterov=None if adam else bool(inner.nesterov),
        betas=(value(inner.beta_1), value(inner.beta_2)) if adam else None,
        eps=value(inner.epsilon) if adam else None,
    )


def _keras_name(name: str) -> tuple[str, str]:
    """torchvision name -> (keras layer name in bench_tensorflow.model, suffix)."""
    *module, suffix = name.split(".")
    if module[0].startswith("layer"):
        rest = module[2:]
        leaf = {("downsample", "0"): "down_conv", ("downsample", "1"): "down_bn"}.get(tuple(rest), rest[0])
        return f"{module[0]}_{module[1]}_{leaf}", suffix
    return {"conv1": "stem_conv", "bn1": "stem_bn", "fc": "fc"}[module[0]], suffix


def _layer_tensors(tensors: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    grouped: dict[str, dict[str, np.ndarray]] = {}
    for name, value in tensors.items():
        layer, suffix = _keras_name(name)
        grouped.setdefault(layer, {})[suffix] = value
    return grouped


def load_shared(path: str, model: Any) -> str:
    """Assign the file's tensors to the model's layers; return the canonical hash read back afterwards."""
    tensors, _ = read_init(path)
    grouped = _layer_tensors(tensors)
    for layer_name, parts in grouped.items():
        try:
            layer = model.get_layer(layer_name)
        except ValueError:
            raise InitError(f"initial weights: the model has no layer {layer_name}") from None
        if "running_mean" in parts:
            values = [parts[s] for s in BN_ORDER]
        elif parts["weight"].ndim == 4:
            values = [np.transpose(parts["weight"], (2, 3, 1, 0))]
        else:
            values = [parts["weight"].T, parts["bias"]]
        current = layer.get_weights()
        if [v.shape for v in current] != [v.shape for v in values]:
            raise InitError(f"initial weights: layer {layer_name} needs {[v.shape for v in current]}, the file has {[v.shape for v in values]}")
        layer.set_weights(values)
    layers_with_weights = {layer.name for layer in model.layers if layer.weights}
    if layers_with_weights != set(grouped):
        raise InitError(f"initial weights leave layers without values: {sorted(layers_with_weights - set(grouped))[:3]}")
    return shared_sha256(tensors, model)


def shared_sha256(tensors: dict[str, np.ndarray], model: Any) -> str:
    back = {}
    for name in tensors:
        layer_name, suffix = _keras_name(name)
        weights = model.get_layer(layer_name).get_weights()
        if len(weights) == 4:
            back[name] = weights[BN_ORDER.index(suffix)]
        elif weights[0].ndim == 4:
            back[name] = np.transpose(weights[0], (3, 2, 0, 1))
        else:
            back[name] = weights[0].T if suffix == "weight" else weights[1]
    return canonical_sha256(back)


def traced(tf: Any, keras: Any, model: Any, images: Any, train: bool) -> Traced:
    """A forward (and backward) of a real batch under the global policy, inference mode (statistics untouched), no update."""
    conv = next(layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D))
    probe = keras.Model(model.inputs, [conv.output, model.output])
    x = tf.convert_to_tensor(images)

    def forward_backward() -> tuple[Any, Any, Any]:
        with tf.GradientTape() as tape:
            conv_out, logits = probe(x, training=False)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros([x.shape[0]], tf.int32),
                                                                                  logits=tf.cast(logits, tf.float32)))
        return conv_out, logits, tape.gradient(loss, conv.kernel) if train else None

    if tf.distribute.has_strategy() and tf.distribute.in_cross_replica_context():
        # mirrored variables give gradients only in a replica context: trace on the first replica
        strategy = tf.distribute.get_strategy()
        conv_out, logits, grad = (strategy.experimental_local_results(part)[0] if part is not None else None
                                  for part in strategy.run(forward_backward))
    else:
        conv_out, logits, grad = forward_backward()
    return Traced(tuple(int(d) for d in x.shape[1:]), int(logits.shape[-1]),
                  Observed(conv_out.dtype.name, grad.dtype.name if grad is not None else None, logits.dtype.name))


def loss_readback(fn: Any) -> LossReadback:
    return LossReadback("cross_entropy", f"tf.nn.{fn.__name__}", "mean", 0.0)
