"""The TensorFlow (Keras 3, TF backend) engine of bench.

Paths: ``baseline`` is what ``Model.fit`` does by default, a ``tf.function`` train step without
XLA; ``optimized`` compiles the whole step with XLA (``jit_compile=True``). Precision is a parity
field: ``bf16``/``fp16`` use Keras mixed policies (fp32 variables, fp16 with dynamic loss
scaling) on either path. Weight decay is coupled L2 (``g + wd * w`` before momentum), as in
PyTorch's SGD. Data is either resident on the device (sliced inside the compiled step) or fed
from host numpy arrays per step, as the spec's ``data_placement`` says.

Several devices: ``tf.distribute.MirroredStrategy`` over the first N GPUs (NCCL all-reduce) or,
on CPU, over N logical CPU devices split off the host CPU before TensorFlow initialises
(``tf.config.set_logical_device_configuration``). Replica ``r`` trains on samples
``start + r*share ..`` of every global batch (bench_engine.shards), its shard resident on its
device (or fed from host memory); each replica scales its mean loss by ``1/N`` and Keras's
optimizer all-reduces (sums) the gradients before the update, so the step follows the
gradient of the global mean loss; BatchNorm statistics stay per replica. An XLA function
cannot capture mirrored variables (it would read replica 0's copy on every device), so with
``xla`` the per-replica forward and backward are compiled as a stateless function of the
replica's variable values (``Model.stateless_call``); the all-reduce and the SGD update run
in the enclosing ``tf.function``.

Several training steps per dispatch (option ``steps_per_dispatch``, Keras's
``steps_per_execution``): on one device, in train mode, with the whole step under XLA and the
data resident on the device, a second ``tf.function(jit_compile=True)`` runs ``K`` full SGD steps
(forward, backward, update, batch-norm statistics) in a ``tf.while_loop``, one per batch start of
an int32 vector of ``K`` starts, in order: the math of ``K`` single steps. ``K`` is the loop's
constant trip count, so XLA knows it (on a GPU a loop of unknown trip count copies its predicate
to the host and waits for the stream at every iteration). The workload queues full batches and
dispatches them ``K`` per call; a partial batch or a sync first runs a shorter queue step by step
with the one-step function. ``auto`` is the timing window (``measurement.window_steps``) on a GPU,
where a small step is bound by kernel launches, and 1 on a CPU (there XLA's loop was measured
slower per step than the single step: ResNet-50, 32x32, batch 8, 0.26 s against 0.16 s). Any
other configuration (inference, baseline or ``xla: false``, host data, several devices) runs one
step per call and reports the option as not applied.

What compiles when: ``tf.function`` traces a Python function into a graph at its first call, and
XLA (or the graph runtime) compiles it for the call's input shapes at its first *execution*;
TensorFlow has no public way to compile a function without running it (``get_concrete_function``
only traces). So on resident data (one device) ``prepare`` runs every kind of call the run will
make (``planned_dispatches``: the harness's schedule; each batch size, looping or single) once,
after copying every model and optimizer variable to host memory, then assigns the copies back:
the run starts from exactly the state of setup, with every shape compiled (and the start tensors
made on the device) before the warmup. Fed from host memory, or on several devices, a shape still
compiles at its first execution: the full batch in the warmup block, a kept partial batch at the
end of the first epoch, inside a timing window.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is first imported

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bench_engine.api import LOSS_STEPS, Engine, StepBatch, UnsupportedError, Workload
from bench_engine.data import Dataset, DatasetError, normalize
from bench_engine.dispatch import StepQueue, planned_dispatches
from bench_engine.hardware import cpu_name, has_tf32
from bench_engine.initweights import resolve_init
from bench_engine.nvidia import driver_version
from bench_tensorflow.model import build_model, count_trainable
from bench_tensorflow.readback import load_shared, loss_readback, make_adam, optimizer_readback, traced

POLICIES = {"fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
OPTION_DEFAULTS: dict[str, Any] = {"xla": "auto", "tf_function": True, "steps_per_dispatch": 1}


def _options(spec: dict[str, Any]) -> dict[str, Any]:
    """The engine options with their defaults; unknown names or values are refused."""
    given = dict(spec.get("engine_options") or {})
    unknown = sorted(set(given) - set(OPTION_DEFAULTS))
    if unknown:
        raise UnsupportedError(f"unknown TensorFlow engine option(s): {', '.join(unknown)}")
    options = {**OPTION_DEFAULTS, **given}
    if options["xla"] not in ("auto", True, False):
        raise UnsupportedError(f"option xla must be auto, true or false, not {options['xla']!r}")
    if not isinstance(options["tf_function"], bool):
        raise UnsupportedError(f"option tf_function must be true or false, not {options['tf_function']!r}")
    group = options["steps_per_dispatch"]
    if group != "auto" and (isinstance(group, bool) or not isinstance(group, int) or group < 1):
        raise UnsupportedError(f"option steps_per_dispatch must be auto or an integer >= 1, not {group!r}")
    return options


def _capability_major(tf: Any) -> int | None:
    """The first GPU's compute-capability major version as TensorFlow reports it (None: not reported)."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    capability = (tf.config.experimental.get_device_details(gpus[0]) or {}).get("compute_capability")
    return int(capability[0]) if capability else None


def configure_devices(tf: Any, kind: str, world: int) -> list[str]:
    """The devices of a ``world``-device run: the first GPUs, or logical CPUs split off the host CPU.

    Must run before the TensorFlow runtime initialises its devices (the logical CPU split).
    """
    if kind == "cuda":
        gpus = tf.config.list_physical_devices("GPU")
        if len(gpus) < world:
            raise UnsupportedError(f"{world} devices requested but TensorFlow sees {len(gpus)} GPU(s)")
        return [f"/GPU:{i}" for i in range(world)]
    if world > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        current = tf.config.get_logical_device_configuration(cpu)
        if current is None or len(current) != world:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(world)])
    return [f"/CPU:{i}" for i in range(world)]


def select_device(tf: Any, requested: str) -> str:
    """Pick ``cuda`` or ``cpu`` for ``requested`` (auto | cpu | cuda); hide the GPUs for cpu.

    Must run before the TensorFlow runtime initialises its devices.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if requested == "cuda" and not gpus:
        raise UnsupportedError("device cuda requested but TensorFlow sees no GPU (CPU-only build or no driver)")
    if requested == "cpu" or not gpus:
        if gpus:
            tf.config.set_visible_devices([], "GPU")
        return "cpu"
    return "cuda"


def precision_in_effect(tf: Any, keras: Any, name: str, loss_scaling: bool) -> dict[str, Any]:
    """The precision policy as TensorFlow and Keras report it now."""
    policy = keras.mixed_precision.global_policy()
    tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    return {
        "name": name,
        "compute_dtype": str(policy.compute_dtype),
        "param_dtype": str(policy.variable_dtype),
        "tf32_matmul": tf32,
        "tf32_conv": tf32,
        "loss_scaling": loss_scaling,
    }


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
    ``[steps]``), and returns the loss of the last. The trip count is a constant, so XLA knows it:
    on a GPU a loop of unknown trip count copies its predicate to the host and waits for the
    stream on every iteration.
    """
    if steps > 1 and not (train and resident is not None and compile_function and jit_compile):
        raise ValueError("several steps per call need training, resident data and the XLA step")
    variables = model.trainable_variables if train else []

    def train_core(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=tf.cast(logits, tf.float32)))
            scaled = optimizer.scale_loss(loss)  # dynamic loss scale under fp16, identity otherwise
        grads = tape.gradient(scaled, variables)
        optimizer.apply(grads, variables)  # unscales and skips non-finite steps under fp16
        return loss

    def infer_core(x: Any, y: Any) -> Any:
        return model(x, training=False)

    core = train_core if train else infer_core
    if resident is not None:
        images, labels = resident
        shape = [int(d) for d in images.shape[1:]]
        take = _dynamic_slice(tf) if (compile_function and jit_compile) else tf.slice

        def step(start: Any, size: int) -> Any:
            x = take(images, tf.stack([start, *([0] * len(shape))]), [size, *shape])
            y = take(labels, tf.reshape(start, [1]), [size])
            return core(x, y)

        if steps > 1:
            one_step = step

            def several(starts: Any, size: int) -> Any:
                def body(i: Any, losses: Any) -> tuple[Any, Any]:
                    start = tf.reshape(take(starts, tf.reshape(i, [1]), [1]), [])  # a runtime index, not a constant
                    return i + 1, losses.write(i, one_step(start, size))

                # XLA runs the iterations in order, each reading the variables the previous one wrote
                _, losses = tf.while_loop(lambda i, _: i < steps, body,
                                          (tf.constant(0, tf.int32), tf.TensorArray(tf.float32, size=steps)))
                return losses.stack()  # every step's loss

            return tf.function(several, jit_compile=True, autograph=False)
    else:
        step = core
    if compile_function:
        return tf.function(step, jit_compile=jit_compile, autograph=False)
    return step


def _dynamic_slice(tf: Any) -> Callable[..., Any]:
    """XLA's DynamicSlice: the start stays a runtime value.

    Under ``jit_compile`` TensorFlow's ``tf.slice`` (and ``tf.gather`` of a ``tf.range``) make the
    start a compile-time constant, so every new start would recompile the whole step.
    """
    try:
        from tensorflow.compiler.tf2xla.python import xla as tfxla
    except ImportError:  # pragma: no cover - present in every TensorFlow 2 build
        return tf.slice
    return tfxla.dynamic_slice


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
    trainable = model.trainable_variables if train else []
    non_trainable = model.non_trainable_variables
    loss_scale = getattr(optimizer, "dynamic_scale", None)  # fp16: LossScaleOptimizer's dynamic scale

    def mean_loss(logits: Any, y: Any) -> Any:
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=tf.cast(logits, tf.float32)))

    if jit_compile:
        # XLA: a stateless function of the replica's variable values (no captured mirrored variable)
        def grads_core(train_values: list[Any], other_values: list[Any], x: Any, y: Any, scale: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch(train_values)
                logits, new_other = model.stateless_call(train_values, other_values, x, training=True)
                loss = mean_loss(logits, y)
                scaled = loss * (scale / world)
            return loss, tape.gradient(scaled, train_values), new_other

        def infer_core(train_values: list[Any], other_values: list[Any], x: Any) -> Any:
            logits, _ = model.stateless_call(train_values, other_values, x, training=False)
            return logits

        xla_grads = tf.function(grads_core, jit_compile=True, autograph=False)
        xla_infer = tf.function(infer_core, jit_compile=True, autograph=False)

        def train_replica(x: Any, y: Any) -> Any:
            scale = tf.cast(loss_scale.value, tf.float32) if loss_scale is not None else tf.constant(1.0, tf.float32)
            loss, grads, new_other = xla_grads([v.value for v in trainable], [v.value for v in non_trainable], x, y, scale)
            for variable, value in zip(non_trainable, new_other, strict=True):
                variable.assign(value)  # this replica's batch-norm statistics
            optimizer.apply(grads, trainable)
            return loss

        def infer_replica(x: Any, y: Any) -> Any:
            return xla_infer([v.value for v in model.trainable_variables], [v.value for v in non_trainable], x)
    else:

        def train_replica(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = mean_loss(model(x, training=True), y)
                scaled = optimizer.scale_loss(loss / world)
            grads = tape.gradient(scaled, trainable)
            optimizer.apply(grads, trainable)
            return loss

        def infer_replica(x: Any, y: Any) -> Any:
            return model(x, training=False)

    replica = train_replica if train else infer_replica
    if resident is not None:
        images, labels = resident
        dims = [int(d) for d in shape]

        def step(start: Any, size: int) -> Any:
            def on_replica(xs: Any, ys: Any, begin: Any) -> Any:
                x = tf.slice(xs, tf.stack([begin, *([0] * len(dims))]), [size, *dims])
                y = tf.slice(ys, tf.reshape(begin, [1]), [size])
                return replica(x, y)

            return strategy.run(on_replica, args=(images, labels, start))
    else:

        def step(x: Any, y: Any) -> Any:
            return strategy.run(replica, args=(x, y))

    if compile_function:
        return tf.function(step, autograph=False)
    return step


def _all_reduce(tf: Any, kind: str | None, devices: list[str]) -> Any:
    """NCCL all-reduce across GPUs; on logical CPU devices, reduction to the first one."""
    if kind == "cuda":
        return tf.distribute.NcclAllReduce()
    return tf.distribute.ReductionToOneDevice(reduce_to_device=devices[0])


def _all_reduce_name(kind: str | None) -> str:
    return "NcclAllReduce" if kind == "cuda" else "ReductionToOneDevice"


@dataclass
class TensorFlowWorkload(Workload):
    """ResNet training or inference steps under TensorFlow."""

    tf: Any = None
    step_fn: Callable[..., Any] | None = None
    train: bool = True
    resident: bool = True
    host_images: Any = None
    host_labels: Any = None
    device_kind: str = "cpu"
    starts: dict[int, Any] = field(default_factory=dict)  # step start -> int32 tensor made in setup, on the device
    last: Any = None
    keep: list[Any] = field(default_factory=list)  # objects that must outlive the run (model, optimizer, data)
    strategy: Any = None  # MirroredStrategy of a several-device run
    shards: Any = None  # its bench_engine.shards.ShardPlan
    devices: list[str] = field(default_factory=list)
    steps_per_dispatch: int = 1  # >1: full batches are queued and dispatched that many per call of multi_fn
    multi_fn: Callable[..., Any] | None = None  # build_step(steps=steps_per_dispatch): multi_fn(starts, size)
    full_size: int = 0  # the full batch (one device)
    groups: dict[tuple[int, ...], Any] = field(default_factory=dict)  # batch starts of a multi_fn call -> int32 tensor
    _queue: StepQueue | None = None
    _history: list[Any] = field(default_factory=list)  # the first LOSS_STEPS losses (tensors, read after the run)
    _recorded: int = 0

    def _remember(self, steps: int) -> None:
        if self.train and self._recorded < LOSS_STEPS:
            self._history.append(self.last)
            self._recorded += steps

    def losses(self) -> list[float]:
        import numpy as np

        values: list[float] = []
        for item in self._history:
            if self.strategy is not None:
                item = self.strategy.reduce(self.tf.distribute.ReduceOp.MEAN, item, axis=None)
            values += [float(v) for v in np.atleast_1d(item.numpy())]
        return values[:LOSS_STEPS]

    def precompile(self, dispatches: Iterable[tuple[int, tuple[int, ...]]], state: list[Any]) -> None:
        """Before timing: compile every (batch size, steps per call) the run will dispatch; the state is left as it was.

        TensorFlow compiles a function (XLA or graph) at its first execution, so each kind of call
        is executed once here, its start tensors made on the device. ``state`` (every variable of
        the model and optimizer) is copied to host memory first and assigned back afterwards: the
        run starts from the bits of setup, and no device memory is held for the copy.
        """
        import numpy as np

        first: dict[tuple[int, int], tuple[int, ...]] = {}
        for size, starts in dispatches:
            if len(starts) > 1:
                self._group(starts)
            first.setdefault((size, len(starts)), starts)
        saved = [np.array(variable.numpy()) for variable in state]
        for (size, steps), starts in sorted(first.items()):
            if steps > 1:
                assert self.multi_fn is not None
                self.last = self.multi_fn(self._group(starts), size)
            else:
                self._single(StepBatch(epoch=0, index=0, start=starts[0], size=size))
        self.sync()
        for variable, value in zip(state, saved, strict=True):
            variable.assign(value)
        self.sync()
        self.last = None
        self._history, self._recorded = [], 0  # the compile calls are not steps of the run

    def _group(self, starts: tuple[int, ...]) -> Any:
        made = self.groups.get(starts)
        if made is None:
            made = self.groups[starts] = self.tf.identity(self.tf.constant(list(starts), self.tf.int32))
        return made

    def __post_init__(self) -> None:
        self._queue = StepQueue(self.steps_per_dispatch, self.full_size, self._single, self._several)

    def step(self, batch: StepBatch) -> None:
        assert self._queue is not None
        self._queue.push(batch)  # full batches wait for the next ones; sync() or a partial batch runs a shorter queue

    def _several(self, batches: list[StepBatch]) -> None:
        """``steps_per_dispatch`` full batches in one call of the looping step."""
        assert self.multi_fn is not None
        self.last = self.multi_fn(self._group(tuple(batch.start for batch in batches)), self.full_size)
        self._remember(len(batches))

    def _single(self, batch: StepBatch) -> None:
        """One step, one call."""
        self._one(batch)
        self._remember(1)

    def _one(self, batch: StepBatch) -> None:
        if self.strategy is not None:
            self.last = self._replicated_step(batch)
            return
        if self.resident:
            start = self.starts.get(batch.start)
            if start is None:
                start = self.tf.constant(batch.start, self.tf.int32)
            out = self.step_fn(start, batch.size)
        else:
            end = batch.start + batch.size
            out = self.step_fn(self.host_images[batch.start : end], self.host_labels[batch.start : end])
        self.last = out

    def _replicated_step(self, batch: StepBatch) -> Any:
        local = self.shards.local(batch)
        if self.resident:
            start = self.starts.get(local.start)
            if start is None:
                start = self.tf.constant(local.start, self.tf.int32)
            return self.step_fn(start, local.size)
        tf, world = self.tf, self.shards.world
        images = self.host_images[batch.start : batch.start + batch.size].reshape(world, local.size, *self.host_images.shape[1:])
        labels = self.host_labels[batch.start : batch.start + batch.size].reshape(world, local.size)

        def on_device(ctx: Any) -> tuple[Any, Any]:
            rank = ctx.replica_id_in_sync_group
            with tf.device(self.devices[rank]):
                return tf.convert_to_tensor(images[rank]), tf.convert_to_tensor(labels[rank])

        x, y = self.strategy.experimental_distribute_values_from_function(on_device)
        return self.step_fn(x, y)

    def sync(self) -> None:
        assert self._queue is not None
        self._queue.flush()
        sync_devices = getattr(getattr(self.tf.test, "experimental", None), "sync_devices", None)
        if sync_devices is not None:
            sync_devices()
        elif self.last is not None:  # older TensorFlow: a read back waits for the stream
            self.tf.reduce_sum(self.last).numpy()

    def loss(self) -> float | None:
        if not self.train or self.last is None:
            return None
        if self.strategy is not None:  # the mean of the replicas' losses (outside the timed windows)
            return float(self.strategy.reduce(self.tf.distribute.ReduceOp.MEAN, self.last, axis=None).numpy())
        import numpy as np

        return float(np.atleast_1d(self.last.numpy())[-1])

    def peak_memory_bytes(self) -> int | None:
        if self.device_kind != "cuda":
            return None
        peaks = []
        for index in range(max(1, len(self.devices))):
            try:
                peaks.append(int(self.tf.config.experimental.get_memory_info(f"GPU:{index}")["peak"]))
            except (ValueError, KeyError):
                pass
        return max(peaks) if peaks else None


def _model_and_optimizer(keras: Any, parity: dict[str, Any], shape: tuple[int, int, int], train: bool,
                         init_file: Any = None, init_out: dict[str, Any] | None = None) -> tuple[Any, Any, bool]:
    """The model (shared initial weights loaded when ``init_file``; ``init_out`` gets {mode, sha256}) and,
    training, its SGD or Adam, loss-scaled for fp16; built in the caller's device or strategy scope."""
    init_out = init_out if init_out is not None else {}
    model = build_model(parity["model"]["arch"], int(parity["model"]["num_classes"]), shape)
    if init_file is not None:  # bench's shared weights replace the initialisers'
        if parity["model"]["arch"] != "resnet50_v1.5":
            raise UnsupportedError(f"shared initial weights: no layout for {parity['model']['arch']}")
        init_out["sha256"] = load_shared(str(init_file), model)
        init_out["mode"] = "shared"
    if not train:
        return model, None, False
    opt = parity["optimizer"]
    if opt["name"] == "adam":
        optimizer = make_adam(keras, opt["lr"], opt["betas"], opt["eps"], opt["weight_decay"])
    elif opt["name"] == "sgd":
        optimizer = make_sgd(keras, opt["lr"], opt["momentum"], opt["nesterov"], opt["weight_decay"])
    else:
        raise UnsupportedError(f"optimizer {opt['name']!r} is not implemented")
    if parity["precision"] == "fp16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
    return model, optimizer, isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


class TensorFlowEngine(Engine):
    """bench's TensorFlow engine: hand-built Keras ResNet, custom tf.function / XLA train step."""

    name = "tensorflow"
    framework = "TensorFlow"

    def __init__(self) -> None:
        self.device_kind: str | None = None
        self.devices: list[str] = []

    def environment(self, spec: dict[str, Any]) -> dict[str, Any]:
        import keras
        import tensorflow as tf

        self.device_kind = select_device(tf, spec.get("device", "auto"))
        world = int(spec["parity"]["devices"])
        self.devices = configure_devices(tf, self.device_kind, world)
        build = dict(tf.sysconfig.get_build_info())
        env: dict[str, Any] = {
            "framework": self.framework,
            "framework_version": tf.__version__,
            "cuda": _str_or_none(build.get("cuda_version")),
            "cudnn": _str_or_none(build.get("cudnn_version")),
            "device_kind": self.device_kind,
            "extra": {"keras": keras.__version__, "is_cuda_build": bool(build.get("is_cuda_build", False))},
        }
        if self.device_kind == "cuda":
            names = []
            gpus = tf.config.list_physical_devices("GPU")
            for gpu in gpus[:world] if world > 1 else gpus:
                details = tf.config.experimental.get_device_details(gpu)
                names.append(str(details.get("device_name", gpu.name)))
            env["devices"] = names
            env["driver"] = driver_version()
        else:
            env["devices"] = [cpu_name()] * world  # logical CPU devices of one host CPU when world > 1
        if world > 1:
            env["extra"]["distribute"] = {"strategy": "MirroredStrategy", "devices": self.devices,
                                          "all_reduce": _all_reduce_name(self.device_kind)}
        return env

    def prepare(self, spec: dict[str, Any], data: Dataset) -> Workload:
        import keras
        import tensorflow as tf

        parity = spec["parity"]
        world = int(parity["devices"])
        if self.device_kind is None:
            self.device_kind = select_device(tf, spec.get("device", "auto"))
            self.devices = configure_devices(tf, self.device_kind, world)
        options = _options(spec)
        precision = parity["precision"]
        optimized = spec["path"] == "optimized"
        if precision in ("fp16", "tf32") and self.device_kind != "cuda":
            raise UnsupportedError(f"precision {precision} needs a CUDA GPU (TF32 and fast fp16 do not exist on CPU)")
        if precision == "tf32" and not has_tf32(_capability_major(tf)):
            raise UnsupportedError("precision tf32 needs TF32 tensor cores (an Ampere or newer GPU)")
        expected_shape = (parity["input"]["height"], parity["input"]["width"], parity["input"]["channels"])
        if tuple(data.images.shape[1:]) != expected_shape:
            raise DatasetError(f"dataset images are {tuple(data.images.shape[1:])}, the spec's input is {expected_shape}")

        xla = optimized if options["xla"] == "auto" else bool(options["xla"])
        compile_function = bool(options["tf_function"])
        if xla and not compile_function:
            raise UnsupportedError("xla needs tf_function: true")
        train = parity["mode"] == "train"
        resident = parity["data_placement"] == "device"
        device = "/GPU:0" if self.device_kind == "cuda" else "/CPU:0"

        keras.utils.set_random_seed(int(parity["seed"]))
        tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
        keras.mixed_precision.set_global_policy(POLICIES[precision])
        if world > 1:
            return self._prepare_parallel(spec, data, tf, keras, options, xla, compile_function, train, resident, expected_shape)

        with tf.device(device):
            init = {"mode": "framework", "sha256": None}
            model, optimizer, scaled = _model_and_optimizer(keras, parity, expected_shape, train, resolve_init(spec, None), init)
            images = normalize(data.images)
            labels = data.labels.astype("int32", copy=False)
            placed, starts = None, {}
            if resident:
                placed = (tf.identity(tf.convert_to_tensor(images)), tf.identity(tf.convert_to_tensor(labels)))
                images = None
                # every epoch steps through the same starts: make them once, where the step runs
                batch = parity["batch"]["per_device"]
                starts = {i * batch: tf.identity(tf.constant(i * batch, tf.int32)) for i in range(parity["steps_per_epoch"])}
            group, why = _steps_per_dispatch(options["steps_per_dispatch"], train=train, xla=xla, resident=resident, world=world,
                                             kind=self.device_kind, window_steps=int(spec["measurement"]["window_steps"]))
            step_fn = build_step(tf, model, optimizer, train=train, compile_function=compile_function, jit_compile=xla, resident=placed)
            multi_fn = None
            if group > 1:
                multi_fn = build_step(tf, model, optimizer, train=train, compile_function=compile_function, jit_compile=xla,
                                      resident=placed, steps=group)

        weight_decay = bool(train and parity["optimizer"]["weight_decay"])
        optimizations = _optimizations(compile_function, xla, POLICIES[precision], resident, scaled, weight_decay, group, why)
        workload = TensorFlowWorkload(
            trainable_parameters=count_trainable(model),
            precision=precision_in_effect(tf, keras, precision, scaled),
            data_placement="device" if resident else "host",
            optimizations=optimizations,
            tf=tf,
            step_fn=step_fn,
            train=train,
            resident=resident,
            host_images=images,
            host_labels=labels,
            device_kind=self.device_kind,
            starts=starts,
            keep=[model, optimizer, placed],
            steps_per_dispatch=group,
            multi_fn=multi_fn,
            full_size=int(parity["batch"]["per_device"]),
        )
        workload.readback = _readback(tf, keras, parity, model, optimizer, init, normalize(data.images[:2]), group)
        workload.data_placement = "device" if placed is not None and isinstance(placed[0], tf.Tensor) else "host"
        if resident:  # every call's shape compiled now, none in the warmup or the steady state
            with tf.device(device):
                workload.precompile(planned_dispatches(spec, data.samples, group), model.variables + (optimizer.variables if train else []))
        return workload

    def _prepare_parallel(self, spec: dict[str, Any], data: Dataset, tf: Any, keras: Any, options: dict[str, Any], xla: bool,
                          compile_function: bool, train: bool, resident: bool, shape: tuple[int, int, int]) -> Workload:
        """The MirroredStrategy workload of a several-device run."""
        from bench_engine.shards import plan_shards

        parity = spec["parity"]
        precision = parity["precision"]
        world = int(parity["devices"])
        shards = plan_shards(spec, data.samples)
        devices = self.devices or configure_devices(tf, self.device_kind or "cpu", world)
        strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=_all_reduce(tf, self.device_kind, devices))
        init = {"mode": "framework", "sha256": None}
        with strategy.scope():
            model, optimizer, scaled = _model_and_optimizer(keras, parity, shape, train, resolve_init(spec, None), init)
        labels_all = data.labels.astype("int32", copy=False)
        images, labels, placed, starts = None, None, None, {}
        if resident:
            from bench_engine.shards import shard_dataset

            parts = [shard_dataset(data, shards, rank) for rank in range(world)]

            def on_device(ctx: Any) -> tuple[Any, Any]:
                part = parts[ctx.replica_id_in_sync_group]
                with tf.device(devices[ctx.replica_id_in_sync_group]):
                    return (tf.identity(tf.convert_to_tensor(normalize(part.images))),
                            tf.identity(tf.convert_to_tensor(part.labels.astype("int32", copy=False))))

            placed = strategy.experimental_distribute_values_from_function(on_device)
            starts = {local: tf.identity(tf.constant(local, tf.int32)) for local in shards.local_starts}
        else:
            images, labels = normalize(data.images), labels_all
        step_fn = build_replicated_step(tf, model, optimizer, strategy, world=world, train=train, compile_function=compile_function,
                                        jit_compile=xla, resident=placed, shape=shape)
        weight_decay = bool(train and parity["optimizer"]["weight_decay"])
        _, why = _steps_per_dispatch(options["steps_per_dispatch"], train=train, xla=xla, resident=resident, world=world,
                                     kind=self.device_kind or "cpu", window_steps=int(spec["measurement"]["window_steps"]))
        optimizations = _optimizations(compile_function, xla, POLICIES[precision], resident, scaled, weight_decay, 1, why)
        if xla:
            optimizations["xla"]["detail"] = ("per-replica forward and backward under tf.function(jit_compile=True) as a stateless "
                                              "function of the replica's variables; all-reduce and SGD update outside XLA")
        optimizations["data_parallel"] = {
            "applied": True,
            "detail": f"tf.distribute.MirroredStrategy over {world} {'GPUs' if self.device_kind == 'cuda' else 'logical CPU devices'} "
                      f"({_all_reduce_name(self.device_kind)}): replica r takes samples start + r*{shards.per_device} .. + "
                      f"{shards.per_device} of every global batch of {shards.global_batch}"
                      + (f"; each replica's shard ({shards.shard_samples} samples) resident on its device" if resident else "")
                      + ("; loss / N per replica, gradients summed by all-reduce" if train else "")
                      + "; BatchNorm statistics per replica",
        }
        workload = TensorFlowWorkload(
            trainable_parameters=count_trainable(model),
            precision=precision_in_effect(tf, keras, precision, scaled),
            data_placement="device" if placed is not None else "host",  # per-replica tensors placed in setup, or host arrays
            optimizations=optimizations,
            world_size=world,
            tf=tf,
            step_fn=step_fn,
            train=train,
            resident=resident,
            host_images=images,
            host_labels=labels,
            device_kind=self.device_kind or "cpu",
            starts=starts,
            keep=[model, optimizer, placed],
            strategy=strategy,
            shards=shards,
            devices=devices,
        )
        with strategy.scope():
            workload.readback = _readback(tf, keras, parity, model, optimizer, init, normalize(data.images[:2]), 1)
        return workload

    def is_out_of_memory(self, exc: BaseException) -> bool:
        name = type(exc).__name__
        text = str(exc)
        return name == "ResourceExhaustedError" or "OOM" in text or super().is_out_of_memory(exc)


def _readback(tf: Any, keras: Any, parity: dict[str, Any], model: Any, optimizer: Any, init: dict[str, Any], probe: Any,
              group: int) -> dict[str, Any]:
    """docs/engine-contract.md: what the built objects say (a traced forward/backward for the dtypes)."""
    train = parity["mode"] == "train"
    return {
        "mode": parity["mode"], "arch": parity["model"]["arch"], **traced(tf, keras, model, probe, train),
        "param_dtypes": sorted({v.dtype.name if hasattr(v.dtype, "name") else str(v.dtype) for v in model.trainable_variables}),
        "init": init, "steps_per_dispatch": group,
        "optimizer": optimizer_readback(keras, optimizer) if train else None,
        "loss": loss_readback(tf.nn.sparse_softmax_cross_entropy_with_logits) if train else None,
    }


def _steps_per_dispatch(value: Any, *, train: bool, xla: bool, resident: bool, world: int, kind: str | None,
                        window_steps: int) -> tuple[int, str]:
    """Training steps per call and why: the option, or (auto) the timing window on a GPU, 1 on a CPU.

    Only the single-device whole XLA train step on device-resident data loops; any other
    configuration runs one step per call whatever the option says (reported as not applied).
    """
    if not train:
        return 1, "inference: one batch per call"
    if world > 1:
        return 1, "one step per call (several devices: the all-reduce and update run outside XLA)"
    if not xla:
        return 1, "one step per call (looping needs the whole step under XLA: optimized path or xla: true)"
    if not resident:
        return 1, "one step per call (looping needs device-resident data)"
    group = 1 if value == "auto" else int(value)  # default 1: never derived from the timing window
    return group, f"steps_per_dispatch: {group}" if group > 1 else "one step per call (steps_per_dispatch: 1)"


def _optimizations(
    compile_function: bool, xla: bool, policy: str, resident: bool, scaled: bool, weight_decay: bool, group: int = 1,
    group_reason: str = "one step per call",
) -> dict[str, dict[str, Any]]:
    """The switches of this run, as ``{name: {applied, detail}}``."""
    looping = (f"{group} full SGD steps per XLA call ({group_reason}): a tf.while_loop of constant trip count over their "
               "batch starts; a shorter queue (at a sync or before a partial batch) runs step by step")
    return {
        "tf_function": {"applied": compile_function, "detail": "the whole step as one tf.function graph" if compile_function else "eager"},
        "xla": {"applied": xla, "detail": "tf.function(jit_compile=True)" if xla else "jit_compile=False (TensorFlow's default)"},
        "mixed_policy": {"applied": policy.startswith("mixed"), "detail": f"keras policy {policy}"},
        "device_resident_data": {
            "applied": resident,
            "detail": "split normalised once on the device, sliced inside the step" if resident else "host numpy slices fed per step",
        },
        "loss_scaling": {"applied": scaled, "detail": "keras LossScaleOptimizer, dynamic" if scaled else "none"},
        "coupled_l2": {"applied": weight_decay, "detail": "g + wd * w before momentum, as PyTorch SGD" if weight_decay else "no weight decay"},
        "steps_per_dispatch": {"applied": group > 1, "detail": looping if group > 1 else group_reason},
        "data_parallel": {"applied": False, "detail": "one device"},
    }


def _str_or_none(value: Any) -> str | None:
    return None if value in (None, "") else str(value)
