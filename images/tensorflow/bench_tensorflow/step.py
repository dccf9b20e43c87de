"""The one-device step: one builder for training and inference, eager, ``tf.function`` or XLA.

Training is the mean cross-entropy in float32, its gradient (through the optimizer's loss scale
under fp16) and the optimizer's update; weight decay is the optimizer's (bench_tensorflow.optimizer).
On device-resident data the step slices its batch from the split at a runtime start.

Several training steps per call (Keras's ``steps_per_execution``): with the whole step under XLA
and resident data, ``K`` full SGD steps run in a ``tf.while_loop``, one per batch start of an int32
vector of ``K`` starts, in order: the math of ``K`` single steps. ``K`` is the loop's constant trip
count, so XLA knows it (on a GPU a loop of unknown trip count copies its predicate to the host and
waits for the stream at every iteration).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Core = Callable[[Any, Any], Any]  # (x, y) -> loss (training) or logits (inference)
Take = Callable[[Any, Any, list[int]], Any]  # (tensor, begin, size) -> slice


def mean_loss(tf: Any, logits: Any, y: Any) -> Any:
    """The training loss: mean sparse cross-entropy over the batch, computed in float32."""
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=tf.cast(logits, tf.float32)))


def build_step(
    tf: Any,
    model: Any,
    optimizer: Any | None,
    *,
    train: bool,
    compile_function: bool,
    jit_compile: bool,
    resident: tuple[Any, Any] | None,
    steps: int = 1,
) -> Callable[..., Any]:
    """The one place a step is built: ``step(start, size)`` on resident data, else ``step(x, y)``.

    Training returns the mean cross-entropy (float32); inference returns the logits. With
    ``resident`` = (images, labels) on the device, ``start`` is an int32 tensor (no retrace per
    step) and ``size`` a Python int (one trace per distinct batch size, i.e. the partial one).

    ``steps`` > 1 (training, resident data, XLA): ``step(starts, size)`` runs ``steps`` full SGD
    steps in a ``tf.while_loop``, the i-th on the batch at ``starts[i]`` (an int32 tensor of shape
    ``[steps]``), and returns every step's loss. The trip count is a constant, so XLA knows it:
    on a GPU a loop of unknown trip count copies its predicate to the host and waits for the
    stream on every iteration.
    """
    if steps > 1 and not (train and resident is not None and compile_function and jit_compile):
        raise ValueError("several steps per call need training, resident data and the XLA step")
    core = _train_core(tf, model, optimizer) if train else _infer_core(model)
    if resident is None:
        step: Callable[..., Any] = core
    else:
        take = dynamic_slice(tf) if (compile_function and jit_compile) else tf.slice
        step = _resident_step(tf, core, resident, take)
        if steps > 1:
            return tf.function(_looping_step(tf, step, take, steps), jit_compile=True, autograph=False)
    if compile_function:
        return tf.function(step, jit_compile=jit_compile, autograph=False)
    return step


def _train_core(tf: Any, model: Any, optimizer: Any) -> Core:
    variables = model.trainable_variables

    def train_core(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = mean_loss(tf, model(x, training=True), y)
            scaled = optimizer.scale_loss(loss)  # dynamic loss scale under fp16, identity otherwise
        grads = tape.gradient(scaled, variables)
        optimizer.apply(grads, variables)  # unscales and skips non-finite steps under fp16
        return loss

    return train_core


def _infer_core(model: Any) -> Core:
    def infer_core(x: Any, y: Any) -> Any:
        return model(x, training=False)

    return infer_core


def _resident_step(tf: Any, core: Core, resident: tuple[Any, Any], take: Take) -> Callable[[Any, int], Any]:
    """``step(start, size)``: the batch of ``size`` samples at ``start`` of the resident split."""
    images, labels = resident
    shape = [int(d) for d in images.shape[1:]]

    def step(start: Any, size: int) -> Any:
        x = take(images, tf.stack([start, *([0] * len(shape))]), [size, *shape])
        y = take(labels, tf.reshape(start, [1]), [size])
        return core(x, y)

    return step


def _looping_step(tf: Any, one_step: Callable[[Any, int], Any], take: Take, steps: int) -> Callable[[Any, int], Any]:
    """``several(starts, size)``: ``steps`` calls of ``one_step`` in a ``tf.while_loop``; every step's loss."""

    def several(starts: Any, size: int) -> Any:
        def body(i: Any, losses: Any) -> tuple[Any, Any]:
            start = tf.reshape(take(starts, tf.reshape(i, [1]), [1]), [])  # a runtime index, not a constant
            return i + 1, losses.write(i, one_step(start, size))

        # XLA runs the iterations in order, each reading the variables the previous one wrote
        _, losses = tf.while_loop(lambda i, _: i < steps, body,
                                  (tf.constant(0, tf.int32), tf.TensorArray(tf.float32, size=steps)))
        return losses.stack()  # every step's loss

    return several


def dynamic_slice(tf: Any) -> Take:
    """XLA's DynamicSlice: the start stays a runtime value.

    Under ``jit_compile`` TensorFlow's ``tf.slice`` (and ``tf.gather`` of a ``tf.range``) make the
    start a compile-time constant, so every new start would recompile the whole step.
    """
    try:
        from tensorflow.compiler.tf2xla.python import xla as tfxla
    except ImportError:  # pragma: no cover - present in every TensorFlow 2 build
        return tf.slice
    return tfxla.dynamic_slice
