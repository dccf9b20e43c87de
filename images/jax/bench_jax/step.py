"""The jitted step: one builder for every path, mode and device count.

``baseline`` jits forward+backward only and applies the Optax update eagerly outside the jit;
``optimized`` jits the whole train step (forward, backward, optimizer update, batch-norm
statistics), optionally donating the state buffers, and can scan ``K`` full steps over their
batch starts in one call. With device data the step slices its batch from the resident split
(traced start, so one compilation per batch size). Data parallel: every array of the data
carries a leading device axis sharded over a 1-D mesh (axis ``data``), the loss is ``jax.vmap``-ed
over it and the state stays replicated, so XLA all-reduces the gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

Data = tuple[Any, Any]  # (images, labels)
Fetch = Callable[[Data, Any], Data]
LossAndGrads = Callable[[Any, Any, Any, Any], tuple[Any, Any, Any]]


class TrainState(NamedTuple):
    """Everything a training step reads and replaces (donated as one argument)."""

    params: Any
    batch_stats: Any
    opt_state: Any


@dataclass(frozen=True)
class StepConfig:
    """How the step function is built: one place to extend (sharding, remat, ...)."""

    mode: str  # train | infer
    full_step: bool  # jit the whole train step (optimized) or forward+backward only (baseline)
    donate: bool  # donate the state buffers to the jitted step
    device_data: bool  # slice the batch from device-resident data inside the step
    size: int  # samples in the batch per device (static: a partial batch gets its own compilation)
    world: int = 1  # devices; above 1 the data carries a leading device axis, sharded over the mesh
    steps: int = 1  # training steps per dispatch (lax.scan over that many batch starts; device data only)


def replicated(mesh: Any) -> NamedSharding:
    """Every device holds the whole array (``P()``)."""
    return NamedSharding(mesh, PartitionSpec())


def sharded(mesh: Any) -> NamedSharding:
    """The leading (device) axis split over the mesh's ``data`` axis."""
    return NamedSharding(mesh, PartitionSpec("data"))


def build_step(model: Any, tx: Any, config: StepConfig, mesh: Any = None,
               unpack: Callable[[Any], Any] | None = None) -> Callable[..., Any]:
    """Build the step for ``config``.

    Train: ``step(state, data, where) -> (state, loss)``; infer: ``step(variables, data, where) -> logits``.
    ``data`` is ``(images, labels)``: the whole split on the device (``where`` = traced start
    index) or the batch itself (``where`` unused). With ``config.world > 1`` every array of
    ``data`` has a leading device axis sharded over ``mesh`` (axis ``data``), the step runs
    vmapped over it and its state outputs stay replicated.
    """
    fetch = _fetcher(config)
    if config.mode == "infer":
        return _infer_step(model, config, fetch, unpack)
    loss_and_grads = _loss_and_grads(model, config.world > 1)
    if config.full_step and config.steps > 1:
        return _scanned_train_step(tx, config, mesh, fetch, loss_and_grads)
    if config.full_step:
        return _full_train_step(tx, config, mesh, fetch, loss_and_grads)
    return _eager_update_step(tx, config, mesh, fetch, loss_and_grads)


def _fetcher(config: StepConfig) -> Fetch:
    """The step's batch: sliced at ``where`` from device-resident data, else the data itself."""
    axis = 1 if config.world > 1 else 0  # the batch axis, after the device axis when data parallel

    def fetch(data: Data, where: Any) -> Data:
        images, labels = data
        if config.device_data:
            images = lax.dynamic_slice_in_dim(images, where, config.size, axis=axis)
            labels = lax.dynamic_slice_in_dim(labels, where, config.size, axis=axis)
        return images, labels

    return fetch


def _infer_step(model: Any, config: StepConfig, fetch: Fetch, unpack: Callable[[Any], Any] | None) -> Callable[..., Any]:
    """``infer(variables, data, where) -> logits``; with ``unpack``, ``variables`` are packed buffers (bench_jax.packing)."""
    parallel = config.world > 1

    def infer(variables: Any, data: Data, where: Any) -> Any:
        if unpack is not None:
            variables = unpack(variables)
        images, _ = fetch(data, where)
        if parallel:
            return jax.vmap(lambda x: model.apply(variables, x, train=False))(images)
        return model.apply(variables, images, train=False)

    return jax.jit(infer)


def _loss_and_grads(model: Any, parallel: bool) -> LossAndGrads:
    """``(params, batch_stats, images, labels) -> (loss, grads, new batch_stats)`` of the global mean loss."""

    def device_loss(params: Any, batch_stats: Any, images: Any, labels: Any) -> tuple[Any, Any]:
        """Mean loss of one device's share and the batch statistics it produces."""
        logits, updates = model.apply({"params": params, "batch_stats": batch_stats}, images, train=True,
                                      mutable=["batch_stats"])
        logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))  # the loss in fp32 (or wider)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), updates["batch_stats"]

    def loss_and_grads(params: Any, batch_stats: Any, images: Any, labels: Any) -> tuple[Any, Any, Any]:
        def loss_fn(p: Any) -> tuple[Any, Any]:
            if not parallel:
                return device_loss(p, batch_stats, images, labels)
            # every device its own share and BatchNorm statistics; equal shares, so the mean of the
            # per-device means is the global mean; its gradient w.r.t. the replicated parameters is
            # summed over the device axis, i.e. all-reduced by XLA
            losses, stats = jax.vmap(device_loss, in_axes=(None, None, 0, 0))(p, batch_stats, images, labels)
            return losses.mean(), jax.tree.map(lambda s: s.mean(axis=0), stats)  # running statistics averaged

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        return loss, grads, new_stats

    return loss_and_grads


def _apply_update(tx: Any, state: TrainState, grads: Any, new_stats: Any) -> TrainState:
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    return TrainState(optax.apply_updates(state.params, updates), new_stats, opt_state)


def _jit_train(fn: Callable[..., Any], config: StepConfig, mesh: Any) -> Callable[..., Any]:
    """jit a whole train step; the state (argument 0) donated if asked, outputs replicated when data parallel."""
    donate = (0,) if config.donate else ()
    if config.world > 1:
        everywhere = replicated(mesh)
        return jax.jit(fn, donate_argnums=donate, out_shardings=(everywhere, everywhere))
    return jax.jit(fn, donate_argnums=donate)


def _scanned_train_step(tx: Any, config: StepConfig, mesh: Any, fetch: Fetch, loss_and_grads: LossAndGrads) -> Callable[..., Any]:
    def train_steps(state: TrainState, data: Data, starts: Any) -> tuple[TrainState, Any]:
        """``len(starts)`` full SGD steps, one per batch start, in order; every step's loss."""

        def one(carry: TrainState, where: Any) -> tuple[TrainState, Any]:
            loss, grads, new_stats = loss_and_grads(carry.params, carry.batch_stats, *fetch(data, where))
            updated = _apply_update(tx, carry, grads, new_stats)
            # the carry keeps its dtypes (an optimizer's count or a statistic may promote under x64)
            return jax.tree.map(lambda new, old: new.astype(old.dtype), updated, carry), loss

        state, losses = lax.scan(one, state, starts)
        return state, losses  # every step's loss (the first K go into the result)

    return _jit_train(train_steps, config, mesh)


def _full_train_step(tx: Any, config: StepConfig, mesh: Any, fetch: Fetch, loss_and_grads: LossAndGrads) -> Callable[..., Any]:
    def train_step(state: TrainState, data: Data, where: Any) -> tuple[TrainState, Any]:
        loss, grads, new_stats = loss_and_grads(state.params, state.batch_stats, *fetch(data, where))
        return _apply_update(tx, state, grads, new_stats), loss

    return _jit_train(train_step, config, mesh)


def _eager_update_step(tx: Any, config: StepConfig, mesh: Any, fetch: Fetch, loss_and_grads: LossAndGrads) -> Callable[..., Any]:
    """The baseline: a jitted forward/backward (batch stats donated if asked), the Optax update op by op outside."""

    def forward_backward(params: Any, batch_stats: Any, data: Data, where: Any) -> tuple[Any, Any, Any]:
        return loss_and_grads(params, batch_stats, *fetch(data, where))

    donate = (1,) if config.donate else ()
    if config.world > 1:
        grad_fn = jax.jit(forward_backward, donate_argnums=donate, out_shardings=replicated(mesh))
    else:
        grad_fn = jax.jit(forward_backward, donate_argnums=donate)

    def eager_step(state: TrainState, data: Data, where: Any) -> tuple[TrainState, Any]:
        loss, grads, new_stats = grad_fn(state.params, state.batch_stats, data, where)
        return _apply_update(tx, state, grads, new_stats), loss  # op by op, outside the jit

    return eager_step
