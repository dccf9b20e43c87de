"""Several devices: the ``tf.distribute.MirroredStrategy`` step and its all-reduce.

Replica ``r`` trains on samples ``start + r*share ..`` of every global batch (bench_engine.shards);
each replica scales its mean loss by ``1/N`` and Keras's optimizer all-reduces (sums) the
gradients before the update, so the step follows the gradient of the global mean loss; BatchNorm
statistics stay per replica. An XLA function cannot capture mirrored variables (it would read
replica 0's copy on every device), so with ``xla`` the per-replica forward and backward are
compiled as a stateless function of the replica's variable values (``Model.stateless_call``);
the all-reduce and the update run in the enclosing ``tf.function``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench_tensorflow.step import mean_loss

Replica = Callable[[Any, Any], Any]  # (x, y) -> this replica's loss (training) or logits (inference)


def all_reduce(tf: Any, kind: str | None, devices: list[str]) -> Any:
    """NCCL all-reduce across GPUs; on logical CPU devices, reduction to the first one."""
    if kind == "cuda":
        return tf.distribute.NcclAllReduce()
    return tf.distribute.ReductionToOneDevice(reduce_to_device=devices[0])


def all_reduce_name(kind: str | None) -> str:
    """The name of :func:`all_reduce`'s cross-device ops on ``kind``."""
    return "NcclAllReduce" if kind == "cuda" else "ReductionToOneDevice"


def build_replicated_step(
    tf: Any,
    model: Any,
    optimizer: Any | None,
    strategy: Any,
    *,
    world: int,
    train: bool,
    compile_function: bool,
    jit_compile: bool,
    resident: tuple[Any, Any] | None,
    shape: tuple[int, int, int],
) -> Callable[..., Any]:
    """The several-device step: ``step(start, size)`` on per-replica resident shards, else ``step(x, y)``
    with per-replica batches; returns the per-replica losses (training) or logits (inference).

    ``start`` is the shard start of the step (the same on every replica), ``size`` each replica's
    share. Each replica's loss is scaled by ``1/world`` before the gradient; Keras's optimizer
    all-reduces (sums) the gradients across replicas in ``apply``.
    """
    if jit_compile:
        replica = _xla_train_replica(tf, model, optimizer, world) if train else _xla_infer_replica(tf, model)
    else:
        replica = _train_replica(tf, model, optimizer, world) if train else _infer_replica(model)
    step = _fed_step(strategy, replica) if resident is None else _resident_step(tf, strategy, replica, resident, shape)
    if compile_function:
        return tf.function(step, autograph=False)
    return step


def _xla_train_replica(tf: Any, model: Any, optimizer: Any, world: int) -> Replica:
    """XLA: the gradient as a stateless function of the replica's variable values (no captured mirrored variable)."""
    trainable = model.trainable_variables
    non_trainable = model.non_trainable_variables
    loss_scale = getattr(optimizer, "dynamic_scale", None)  # fp16: LossScaleOptimizer's dynamic scale

    def grads_core(train_values: list[Any], other_values: list[Any], x: Any, y: Any, scale: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(train_values)
            logits, new_other = model.stateless_call(train_values, other_values, x, training=True)
            loss = mean_loss(tf, logits, y)
            scaled = loss * (scale / world)
        return loss, tape.gradient(scaled, train_values), new_other

    xla_grads = tf.function(grads_core, jit_compile=True, autograph=False)

    def train_replica(x: Any, y: Any) -> Any:
        scale = tf.cast(loss_scale.value, tf.float32) if loss_scale is not None else tf.constant(1.0, tf.float32)
        loss, grads, new_other = xla_grads([v.value for v in trainable], [v.value for v in non_trainable], x, y, scale)
        for variable, value in zip(non_trainable, new_other, strict=True):
            variable.assign(value)  # this replica's batch-norm statistics
        optimizer.apply(grads, trainable)
        return loss

    return train_replica


def _xla_infer_replica(tf: Any, model: Any) -> Replica:
    non_trainable = model.non_trainable_variables

    def infer_core(train_values: list[Any], other_values: list[Any], x: Any) -> Any:
        logits, _ = model.stateless_call(train_values, other_values, x, training=False)
        return logits

    xla_infer = tf.function(infer_core, jit_compile=True, autograph=False)

    def infer_replica(x: Any, y: Any) -> Any:
        return xla_infer([v.value for v in model.trainable_variables], [v.value for v in non_trainable], x)

    return infer_replica


def _train_replica(tf: Any, model: Any, optimizer: Any, world: int) -> Replica:
    trainable = model.trainable_variables

    def train_replica(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = mean_loss(tf, model(x, training=True), y)
            scaled = optimizer.scale_loss(loss / world)
        grads = tape.gradient(scaled, trainable)
        optimizer.apply(grads, trainable)
        return loss

    return train_replica


def _infer_replica(model: Any) -> Replica:
    def infer_replica(x: Any, y: Any) -> Any:
        return model(x, training=False)

    return infer_replica


def _fed_step(strategy: Any, replica: Replica) -> Callable[[Any, Any], Any]:
    """``step(x, y)``: ``replica`` on every replica's own batch (per-replica values)."""

    def step(x: Any, y: Any) -> Any:
        return strategy.run(replica, args=(x, y))

    return step


def _resident_step(tf: Any, strategy: Any, replica: Replica, resident: tuple[Any, Any],
                   shape: tuple[int, int, int]) -> Callable[[Any, int], Any]:
    """``step(start, size)``: ``replica`` on the ``size`` samples at ``start`` of every replica's resident shard."""
    images, labels = resident
    dims = [int(d) for d in shape]

    def step(start: Any, size: int) -> Any:
        def on_replica(xs: Any, ys: Any, begin: Any) -> Any:
            x = tf.slice(xs, tf.stack([begin, *([0] * len(dims))]), [size, *dims])
            y = tf.slice(ys, tf.reshape(begin, [1]), [size])
            return replica(x, y)

        return strategy.run(on_replica, args=(images, labels, start))

    return step
