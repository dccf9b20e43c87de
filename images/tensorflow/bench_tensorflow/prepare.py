"""A run spec and its dataset made into a :class:`TensorFlowWorkload`, on one device or under MirroredStrategy.

Data is either resident on the device (sliced inside the compiled step; each replica's shard on
its device when data parallel) or fed from host numpy arrays per step, as the spec's
``data_placement`` says. On resident data (one device) every call the run will make is
compiled here, before timing starts (:meth:`TensorFlowWorkload.precompile`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.contract import Parity, RunSpec
from bench_engine.data import Dataset, check_dataset, normalize
from bench_engine.dispatch import planned_dispatches
from bench_engine.report import FRAMEWORK_INIT, InitReadback, Readback
from bench_engine.shards import ShardPlan
from bench_tensorflow import optimizer as optimizers
from bench_tensorflow.distributed import all_reduce, all_reduce_name, build_replicated_step
from bench_tensorflow.model import build_model, count_trainable
from bench_tensorflow.options import (
    REPLICATED_XLA_DETAIL,
    StepSwitches,
    data_parallel,
    optimizations,
    resolve_switches,
    steps_per_dispatch,
)
from bench_tensorflow.precision import POLICIES, apply_precision, check_precision, precision_in_effect
from bench_tensorflow.readback import load_shared, loss_readback, optimizer_readback, traced
from bench_tensorflow.step import build_step
from bench_tensorflow.workload import TensorFlowWorkload

# bench_tensorflow.optimizer is used through its module (optimizers.build_optimizer), so a test
# that replaces its make_sgd reaches this code.


@dataclass(frozen=True)
class Context:
    """What both workload builders share: the framework modules, the devices, the input and the switches."""

    tf: Any
    keras: Any
    kind: str  # cuda | cpu
    devices: list[str]
    shape: tuple[int, int, int]  # (height, width, channels) of an image
    switches: StepSwitches


def build_workload(spec: RunSpec, data: Dataset, tf: Any, keras: Any, kind: str, devices: list[str]) -> TensorFlowWorkload:
    """Check the spec, set the seed and the precision policy, build the one-device or MirroredStrategy workload."""
    parity = spec.parity
    precision = parity.precision
    check_precision(tf, precision, kind)
    shape = check_dataset(parity, data)
    ctx = Context(tf, keras, kind, devices, shape, resolve_switches(spec))
    keras.utils.set_random_seed(parity.seed)
    apply_precision(tf, keras, precision)
    workload = _parallel_workload(ctx, spec, data) if parity.devices > 1 else _single_workload(ctx, spec, data)
    if workload.train:  # the trained values' starting point, after loading and the compile-ahead calls' restore
        workload.initial_weights = [v.numpy() for v in workload.keep[0].trainable_variables]
    return workload


@dataclass(frozen=True)
class Built:
    """The model, its optimizer (None for inference) and how its initial weights were set."""

    model: Any
    optimizer: Any
    scaled: bool  # fp16 loss scaling
    init: InitReadback


def model_and_optimizer(keras: Any, parity: Parity, shape: tuple[int, int, int], train: bool, init_file: Any = None) -> Built:
    """The model (shared initial weights loaded when ``init_file``) and, training, its SGD or Adam, loss-scaled
    for fp16; built in the caller's device or strategy scope."""
    init = FRAMEWORK_INIT
    model = build_model(parity.arch, parity.num_classes, shape)
    if init_file is not None:  # bench's shared weights replace the initialisers'
        if parity.arch != "resnet50_v1.5":
            raise UnsupportedError(f"shared initial weights: no layout for {parity.arch}")
        init = InitReadback("shared", load_shared(str(init_file), model))
    if not train:
        return Built(model, None, False, init)
    optimizer, scaled = optimizers.build_optimizer(keras, parity, model.trainable_variables)
    return Built(model, optimizer, scaled, init)


def _single_workload(ctx: Context, spec: RunSpec, data: Dataset) -> TensorFlowWorkload:
    """One device: resident split and step starts made on it, the looping step when steps_per_dispatch applies."""
    tf, keras, parity = ctx.tf, ctx.keras, spec.parity
    train, resident = parity.mode == "train", parity.data_placement == "device"
    device = "/GPU:0" if ctx.kind == "cuda" else "/CPU:0"
    xla, compile_function = ctx.switches.xla, ctx.switches.compile_function
    with tf.device(device):
        built = model_and_optimizer(keras, parity, ctx.shape, train, spec.init_file())
        model, optimizer, scaled = built.model, built.optimizer, built.scaled
        placed, starts, images, labels = _place_split(tf, parity, data, resident)
        dispatch = steps_per_dispatch(ctx.switches.steps_per_dispatch, train=train, xla=xla, resident=resident, world=1,
                                      kind=ctx.kind, plan=spec.schedule, samples=data.samples)
        group = dispatch.steps
        step_fn = build_step(tf, model, optimizer, train=train, compile_function=compile_function, jit_compile=xla, resident=placed)
        multi_fn = None
        if group > 1:
            multi_fn = build_step(tf, model, optimizer, train=train, compile_function=compile_function, jit_compile=xla,
                                  resident=placed, steps=group)
    weight_decay = bool(train and parity.optimizer["weight_decay"])
    workload = TensorFlowWorkload(
        trainable_parameters=count_trainable(model),
        precision=precision_in_effect(tf, keras, parity.precision, scaled),
        data_placement="device" if resident else "host",
        optimizations=optimizations(compile_function, xla, POLICIES[parity.precision], resident, scaled, weight_decay, dispatch),
        tf=tf, step_fn=step_fn, train=train, resident=resident, host_images=images, host_labels=labels, device_kind=ctx.kind,
        starts=starts, keep=[model, optimizer, placed], steps_per_dispatch=group, multi_fn=multi_fn,
        full_size=parity.batch.per_device,
    )
    workload.readback = _readback(tf, keras, parity, built, normalize(data.images[:2]), group)
    workload.data_placement = "device" if placed is not None and isinstance(placed[0], tf.Tensor) else "host"
    if resident:  # every call's shape compiled now, none in the warmup or the steady state
        with tf.device(device):
            workload.precompile(planned_dispatches(spec.schedule, data.samples, group),
                                model.variables + (optimizer.variables if train else []))
    return workload


def _place_split(tf: Any, parity: Parity, data: Dataset, resident: bool) -> tuple[Any, dict[int, Any], Any, Any]:
    """(placed split, start tensors, host images, host labels) in the caller's device scope.

    Resident: the normalised split and every step start as tensors on the device (the host images
    are dropped); otherwise the host arrays the steps slice.
    """
    images = normalize(data.images)
    labels = data.labels.astype("int32", copy=False)
    if not resident:
        return None, {}, images, labels
    placed = (tf.identity(tf.convert_to_tensor(images)), tf.identity(tf.convert_to_tensor(labels)))
    # every epoch steps through the same starts: make them once, where the step runs
    batch = parity.batch.per_device
    starts = {i * batch: tf.identity(tf.constant(i * batch, tf.int32)) for i in range(parity.steps_per_epoch)}
    return placed, starts, None, labels


def _parallel_workload(ctx: Context, spec: RunSpec, data: Dataset) -> TensorFlowWorkload:
    """Several devices: the MirroredStrategy workload, each replica's shard resident on its device or fed per step."""
    from bench_engine.shards import plan_shards

    tf, keras, parity = ctx.tf, ctx.keras, spec.parity
    train, resident = parity.mode == "train", parity.data_placement == "device"
    world, xla, compile_function = parity.devices, ctx.switches.xla, ctx.switches.compile_function
    shards = plan_shards(spec, data.samples)
    strategy = tf.distribute.MirroredStrategy(devices=ctx.devices, cross_device_ops=all_reduce(tf, ctx.kind, ctx.devices))
    with strategy.scope():
        built = model_and_optimizer(keras, parity, ctx.shape, train, spec.init_file())
        model, optimizer, scaled = built.model, built.optimizer, built.scaled
    images, labels, placed, starts = None, None, None, {}
    if resident:
        placed, starts = _place_shards(tf, strategy, ctx.devices, data, shards)
    else:
        images, labels = normalize(data.images), data.labels.astype("int32", copy=False)
    step_fn = build_replicated_step(tf, model, optimizer, strategy, world=world, train=train, compile_function=compile_function,
                                    jit_compile=xla, resident=placed, shape=ctx.shape)
    dispatch = steps_per_dispatch(ctx.switches.steps_per_dispatch, train=train, xla=xla, resident=resident, world=world,
                                  kind=ctx.kind, plan=spec.schedule, samples=data.samples)
    weight_decay = bool(train and parity.optimizer["weight_decay"])
    switches = optimizations(compile_function, xla, POLICIES[parity.precision], resident, scaled, weight_decay, dispatch)
    if xla:
        switches["xla"] = switches["xla"]._replace(detail=REPLICATED_XLA_DETAIL)
    switches["data_parallel"] = data_parallel(world, ctx.kind, all_reduce_name(ctx.kind), shards, resident, train)
    workload = TensorFlowWorkload(
        trainable_parameters=count_trainable(model),
        precision=precision_in_effect(tf, keras, parity.precision, scaled),
        data_placement="device" if placed is not None else "host",  # per-replica tensors placed in setup, or host arrays
        optimizations=switches, world_size=world, tf=tf, step_fn=step_fn, train=train, resident=resident,
        host_images=images, host_labels=labels, device_kind=ctx.kind, starts=starts, keep=[model, optimizer, placed],
        strategy=strategy, shards=shards, devices=ctx.devices,
    )
    with strategy.scope():
        workload.readback = _readback(tf, keras, parity, built, normalize(data.images[:2]), 1)
    return workload


def _place_shards(tf: Any, strategy: Any, devices: list[str], data: Dataset, shards: ShardPlan) -> tuple[Any, dict[int, Any]]:
    """(per-replica split, start tensors): each replica's normalised shard on its device, the shard starts as tensors."""
    from bench_engine.shards import shard_dataset

    parts = [shard_dataset(data, shards, rank) for rank in range(shards.world)]

    def on_device(ctx: Any) -> tuple[Any, Any]:
        part = parts[ctx.replica_id_in_sync_group]
        with tf.device(devices[ctx.replica_id_in_sync_group]):
            return (tf.identity(tf.convert_to_tensor(normalize(part.images))),
                    tf.identity(tf.convert_to_tensor(part.labels.astype("int32", copy=False))))

    placed = strategy.experimental_distribute_values_from_function(on_device)
    return placed, {local: tf.identity(tf.constant(local, tf.int32)) for local in shards.local_starts}


def _readback(tf: Any, keras: Any, parity: Parity, built: Built, probe: Any, group: int) -> Readback:
    """docs/engine-contract.md: what the built objects say (a traced forward/backward for the dtypes)."""
    train = parity.mode == "train"
    model = built.model
    seen = traced(tf, keras, model, probe, train)
    return Readback(
        mode=parity.mode, arch=parity.arch, input_shape=seen.input_shape, num_classes=seen.num_classes, observed=seen.observed,
        param_dtypes=tuple(sorted({v.dtype.name if hasattr(v.dtype, "name") else str(v.dtype) for v in model.trainable_variables})),
        init=built.init, steps_per_dispatch=group,
        optimizer=optimizer_readback(keras, built.optimizer) if train else None,
        loss=loss_readback(tf.nn.sparse_softmax_cross_entropy_with_logits) if train else None,
    )
