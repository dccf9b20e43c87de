"""What the JAX engine reports about itself, read from its live objects (docs/engine-contract.md).

Optax transformations are closures; built with ``optax.inject_hyperparams`` their numeric
hyper-parameters live in the optimizer *state*, which is where they are read back from. The
shared initial weights (torchvision names, PyTorch layouts) are converted into the Flax trees
(conv OIHW -> HWIO, dense [out, in] -> [in, out]; BN weight/bias -> scale/bias, running
statistics -> batch_stats mean/var) and hashed after converting the trees back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench_engine.initweights import InitError, canonical_sha256, read_init
from bench_engine.report import LossReadback, Observed, OptimizerReadback, Traced

TORCH_TO_FLAX_BN = {"weight": ("params", "scale"), "bias": ("params", "bias"), "running_mean": ("batch_stats", "mean"),
                    "running_var": ("batch_stats", "var")}


def make_tx(settings: dict[str, Any]) -> Any:
    """Coupled L2 (``add_decayed_weights`` first, as torch's SGD/Adam ``weight_decay``), then SGD or Adam.

    ``optax.adam`` is torch.optim.Adam: bias-corrected moments, eps added outside the square root
    (eps_root 0). Momentum 0 runs optax's trace with decay 0, the same update as plain SGD.
    """
    import optax

    decay = optax.inject_hyperparams(optax.add_decayed_weights)(weight_decay=settings["weight_decay"])
    if settings["name"] == "adam":
        b1, b2 = settings["betas"]
        inner = optax.inject_hyperparams(optax.adam)(learning_rate=settings["lr"], b1=b1, b2=b2, eps=settings["eps"])
    elif settings["name"] == "sgd":
        inner = optax.inject_hyperparams(optax.sgd, static_args=("nesterov",))(
            learning_rate=settings["lr"], momentum=settings["momentum"], nesterov=settings["nesterov"])
    else:
        from bench_engine.api import UnsupportedError

        raise UnsupportedError(f"optimizer {settings['name']!r} is not implemented")
    return optax.chain(decay, inner)


def optimizer_readback(settings_name: str, opt_state: Any, nesterov: bool | None) -> OptimizerReadback:
    """Hyper-parameters from the injected state (``nesterov`` is a static argument of optax.sgd)."""
    decay, inner = opt_state[0].hyperparams, opt_state[1].hyperparams
    value = lambda key: float(np.asarray(inner[key]))  # noqa: E731
    adam = settings_name == "adam"
    return OptimizerReadback(
        name=settings_name,
        class_=f"optax.chain(add_decayed_weights, {'adam' if adam else 'sgd'}) via optax.inject_hyperparams",
        lr=value("learning_rate"),
        weight_decay=float(np.asarray(decay["weight_decay"])),
        momentum=None if adam else value("momentum"),
        nesterov=None if adam else bool(nesterov),
        betas=(value("b1"), value("b2")) if adam else None,
        eps=value("eps") if adam else None,
    )


def _flax_path(name: str) -> tuple[str, tuple[str, ...], str]:
    """torchvision name -> (collection, module path, leaf) in bench_jax.model.ResNet."""
    *module, suffix = name.split(".")
    if module[0].startswith("layer"):
        rest = module[2:]
        leaf_module = {("downsample", "0"): "downsample_conv", ("downsample", "1"): "downsample_bn"}.get(tuple(rest), rest[0])
        path = (f"{module[0]}_{module[1]}", leaf_module)
    else:
        path = (module[0],)
    if path[-1].startswith("conv") or path[-1] == "downsample_conv" or path[-1] == "fc":
        return "params", path, "kernel" if suffix == "weight" else "bias"
    collection, leaf = TORCH_TO_FLAX_BN[suffix]
    return collection, path, leaf


def _to_flax(name: str, value: np.ndarray) -> np.ndarray:
    if value.ndim == 4:
        return np.transpose(value, (2, 3, 1, 0))  # OIHW -> HWIO
    if value.ndim == 2:
        return value.T  # [out, in] -> [in, out]
    return value


def _to_torch(value: np.ndarray) -> np.ndarray:
    if value.ndim == 4:
        return np.transpose(value, (3, 2, 0, 1))  # HWIO -> OIHW
    if value.ndim == 2:
        return value.T
    return value


def _get(tree: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def load_shared(path: str, params: Any, batch_stats: Any) -> tuple[Any, Any]:
    """New (params, batch_stats) with every tensor of the file, shapes checked against the model's."""
    import jax

    tensors, _ = read_init(path)
    # writable zeros of each leaf's shape and dtype (the leaves may be abstract: jax.eval_shape's)
    trees = jax.tree.map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), {"params": params, "batch_stats": batch_stats})
    seen = 0
    for name, value in tensors.items():
        collection, module, leaf = _flax_path(name)
        try:
            holder = _get(trees[collection], module)
        except KeyError:
            raise InitError(f"initial weights: {name} has no place in the model ({collection}/{'/'.join(module)})") from None
        converted = _to_flax(name, value)
        if holder[leaf].shape != converted.shape:
            raise InitError(f"initial weights: {name} is {value.shape}, the model needs {holder[leaf].shape} (flax layout)")
        holder[leaf] = converted.astype(holder[leaf].dtype)
        seen += 1
    total = len(jax.tree_util.tree_leaves(trees))
    if seen != total:
        raise InitError(f"initial weights fill {seen} of the model's {total} tensors")
    return trees["params"], trees["batch_stats"]


def shared_sha256(path: str, params: Any, batch_stats: Any) -> str:
    """Canonical hash of the model's trees, converted back to the file's names and layouts."""
    tensors, _ = read_init(path)
    trees = {"params": params, "batch_stats": batch_stats}
    back = {}
    for name in tensors:
        collection, module, leaf = _flax_path(name)
        back[name] = _to_torch(np.asarray(_get(trees[collection], module)[leaf], dtype=np.float32))
    return canonical_sha256(back)


def traced(model: Any, params: Any, batch_stats: Any, images: Any, train: bool) -> Traced:
    """Abstract trace (jax.eval_shape, nothing computed) of a forward and backward on ``images``'
    shape: the first convolution's output dtype, its kernel gradient's dtype, the logits."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    def is_conv(module: Any, method: str) -> bool:
        return isinstance(module, nn.Conv) and method == "__call__"

    def forward(p: Any, x: Any) -> tuple[Any, Any]:
        logits, state = model.apply({"params": p, "batch_stats": batch_stats}, x, train=train,
                                    mutable=["batch_stats", "intermediates"], capture_intermediates=is_conv)
        return logits, state["intermediates"]

    logits, inter = jax.eval_shape(forward, params, images)
    first_path, first = jax.tree_util.tree_flatten_with_path(inter)[0][0]
    grad_dtype = None
    if train:
        labels = jnp.zeros((images.shape[0],), jnp.int32)

        def loss(p: Any, x: Any) -> Any:
            out = forward(p, x)[0]
            return optax.softmax_cross_entropy_with_integer_labels(out.astype(jnp.float32), labels).mean()

        grads = jax.eval_shape(jax.grad(loss), params, images)
        keys = [getattr(k, "key", None) for k in first_path]
        module = tuple(k for k in keys[: keys.index("__call__")] if k is not None)
        grad_dtype = str(_get(grads, module)["kernel"].dtype)
    return Traced(tuple(int(d) for d in images.shape[1:]), int(logits.shape[-1]),
                  Observed(str(first.dtype), grad_dtype, str(logits.dtype)))


def loss_readback(fn: Any) -> LossReadback:
    """The loss function the step calls (its qualified name), mean-reduced by the step, no smoothing."""
    return LossReadback("cross_entropy", f"{fn.__module__}.{fn.__name__}", "mean", 0.0)
