"""A run spec and its dataset made into a :class:`JaxWorkload`: checks, mesh, model state, placed data, read-back.

Several devices (data parallel, one process): a 1-D ``Mesh`` of the devices with axis ``data``;
with device data each device holds only its own shard (``NamedSharding(mesh, P('data'))``),
parameters, batch statistics and optimizer state are replicated (``P()``). With device data
every call the run will make is compiled here, before timing starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from bench_engine.api import UnsupportedError
from bench_engine.contract import Parity, RunSpec
from bench_engine.data import Dataset, check_dataset, normalize
from bench_engine.report import FRAMEWORK_INIT, InitReadback, OptimizerReadback, Readback, Switch
from bench_engine.setupclock import SetupClock
from bench_engine.shards import ShardPlan
from bench_jax import dnn, readback
from bench_jax import model as models
from bench_jax.folding import folded_inference
from bench_jax.options import (
    JaxOptions,
    command_buffer_flags,
    donate,
    donation_declined,
    engine_options,
    memory_fraction_switch,
    optimizations,
    pack_variables,
    remat_flags,
    steps_per_dispatch,
)
from bench_jax.packing import pack
from bench_jax.precision import PrecisionPolicy, apply_precision
from bench_jax.step import StepConfig, TrainState, replicated, sharded
from bench_jax.workload import JaxWorkload, allocator_limit, planned_calls

# bench_jax.model and bench_jax.readback are used through their modules (models.build_model,
# readback.make_tx, ...), so a test that replaces one of their functions reaches this code.


@dataclass
class DeviceState:
    """What setup put on the device(s), and what the read-back needs of it."""

    state: Any  # TrainState (train) or the variables dict (infer), committed to the device(s)
    tx: Any  # the Optax transformation (train)
    placed: Any  # (images, labels): on the device(s), or host numpy arrays
    params: Any  # the initial parameters and batch statistics
    batch_stats: Any
    init: InitReadback  # of the initial weights
    optimizer: OptimizerReadback | None  # the optimizer's read-back (train)


def build_workload(spec: RunSpec, data: Dataset, kind: str, devices: list[Any]) -> JaxWorkload:
    """The workload of ``spec`` on ``devices`` (of platform ``kind``), every device-data call compiled."""
    parity = spec.parity
    world = parity.devices
    geometry = _check_request(parity, data, kind, devices)
    mesh, shards = _mesh_and_shards(spec, data, devices, world)
    mode = parity.mode
    optimized = spec.path == "optimized"
    device_data = parity.data_placement == "device"
    options = engine_options(spec)
    clock = SetupClock()
    policy = apply_precision(parity.precision, kind, devices)
    model = _model(parity, policy)
    cuda_graphs = ready_for_command_buffers(options, spec, kind, devices[:world])
    ready = _setup_on_device(spec, data, model, geometry, devices[0], mesh, shards, clock)
    precision = parity.precision
    step_config = StepConfig(mode=mode, full_step=optimized, donate=donate(options, optimized, mode, kind, precision),
                             device_data=device_data, size=parity.batch.per_device, world=world)
    dispatch = steps_per_dispatch(options, step_config, kind, spec.schedule, data.samples)
    group = dispatch.steps
    step_model, state, folded_switch = folded_inference(options.fold_batchnorm, optimized, parity, model, ready.state)
    packed_switch = pack_variables(options, step_config, optimized)
    unpack = None
    if packed_switch.applied:
        packed = pack(state, devices[0])
        state, unpack = packed.buffers, packed.unpack
        packed_switch = Switch(True, f"{packed_switch.detail} ({packed.leaves} leaves in {len(packed.buffers)} buffer(s))")
    workload = JaxWorkload(
        trainable_parameters=models.count_parameters(ready.params),
        precision=policy.report(),
        data_placement=parity.data_placement,
        optimizations=optimizations(step_config, os.environ.get("XLA_FLAGS", ""), kind, shards, dispatch,
                                    donation_declined(options, optimized, mode, kind, precision),
                                    cuda_graphs, packed_switch, folded_switch, remat_flags(options, spec.device),
                                    memory_fraction_switch(os.environ, kind, allocator_limit(devices[:world]))),
        world_size=world, mesh=mesh, shards=shards, mode=mode, model=step_model, tx=ready.tx, state=state,
        data=ready.placed, device=devices[0], step_config=step_config, steps_per_dispatch=group, unpack=unpack,
    )
    if mode == "train":  # where training starts from, read before the first (donating) step
        workload.initial_params = jax.device_get(ready.state.params)
    held = ready.placed[0]
    workload.data_placement = "device" if isinstance(held, jax.Array) else "host"  # read back: what holds the split
    workload.readback = _readback(parity, model, ready, shards is not None and device_data, group)
    workload.precision = policy.report(",".join(workload.readback.param_dtypes or ()))
    clock.mark("read-back trace")
    if device_data:
        workload.precompile(planned_calls(spec.schedule, data.samples, world, group))
        clock.mark("compile")
        workload.place_starts(spec.schedule, data.samples)
        clock.mark("starts placed")
    clock.say()
    return workload


def ready_for_command_buffers(options: JaxOptions, spec: RunSpec, kind: str, devices: list[Any]) -> str:
    """The command-buffer flag the process runs with ('' for none); on a GPU, cuDNN initialised first (bench_jax.dnn)."""
    flag = command_buffer_flags(options, spec.path, spec.device)
    if kind == "cuda" and flag:
        dnn.initialise_dnn(devices)  # before any convolution can be recorded into a command buffer
    return flag


def _check_request(parity: Parity, data: Dataset, kind: str, devices: list[Any]) -> tuple[int, int, int]:
    """Refuse what the engine cannot run; the input geometry (height, width, channels)."""
    world = parity.devices
    if len(devices) < world:
        raise UnsupportedError(f"{world} devices requested but JAX sees {len(devices)} {kind} device(s)")
    if parity.optimizer["name"] not in ("sgd", "adam") or parity.loss != "cross_entropy":
        raise UnsupportedError(f"optimizer {parity.optimizer['name']!r} / loss {parity.loss!r} not supported")
    return check_dataset(parity, data)


def _mesh_and_shards(spec: RunSpec, data: Dataset, devices: list[Any], world: int) -> tuple[Any, ShardPlan | None]:
    """Data parallel: the 1-D mesh (axis ``data``) of the first ``world`` devices and the shard plan; else (None, None)."""
    if world == 1:
        return None, None
    from jax.sharding import Mesh

    from bench_engine.shards import plan_shards

    shards = plan_shards(spec, data.samples)
    return Mesh(np.array(devices[:world]), ("data",)), shards


def _model(parity: Parity, policy: PrecisionPolicy) -> Any:
    """The Flax model at the policy's compute dtype and layer precision, float32 parameters."""
    layer_precision = lax.Precision.HIGHEST if policy.highest else None
    return models.build_model(parity.arch, parity.num_classes, dtype=jnp.dtype(policy.compute_dtype),
                              param_dtype=jnp.float32, precision=layer_precision)


def _setup_on_device(spec: RunSpec, data: Dataset, model: Any, geometry: tuple[int, int, int], device: Any,
                     mesh: Any, shards: ShardPlan | None, clock: SetupClock) -> DeviceState:
    """Initial state and data, committed to the device(s) and ready."""
    parity = spec.parity
    with jax.default_device(device):
        params, batch_stats, init = _initial_variables(spec, model, geometry, device)
        state, tx, optimizer = _train_state(parity, params, batch_stats)
        clock.mark("model and weights")
        placed = _place_data(data, parity.data_placement == "device", shards, mesh, device)
        # commit every buffer to the device(s): uncommitted inputs would make the second step recompile
        state = jax.device_put(state, replicated(mesh) if mesh is not None else device)
        jax.block_until_ready((state, placed))
        clock.mark("data placed")
    return DeviceState(state, tx, placed, params, batch_stats, init, optimizer)


def _initial_variables(spec: RunSpec, model: Any, geometry: tuple[int, int, int], device: Any) -> tuple[Any, Any, InitReadback]:
    """(params, batch_stats, init): the framework's initialisation, or bench's shared weights when the spec names them."""
    parity = spec.parity
    key = jax.random.PRNGKey(parity.seed)
    sample = jnp.zeros((1, *geometry), jnp.float32)
    init_file = spec.init_file()
    if init_file is not None and parity.arch != "resnet50_v1.5":
        raise UnsupportedError(f"shared initial weights: no layout for {parity.arch}")
    # bench's shared weights fill every leaf: the initialiser is only traced for the trees' shapes, not compiled
    def init_fn(k: Any) -> Any:
        return model.init(k, sample, train=False)

    variables = jax.eval_shape(init_fn, key) if init_file is not None else jax.jit(init_fn)(key)
    params, batch_stats = variables["params"], variables["batch_stats"]
    init = FRAMEWORK_INIT
    if init_file is not None:  # bench's shared weights replace the initialiser's
        params, batch_stats = jax.device_put(readback.load_shared(str(init_file), params, batch_stats), device)
        init = InitReadback("shared", readback.shared_sha256(str(init_file), params, batch_stats))
    return params, batch_stats, init


def _train_state(parity: Parity, params: Any, batch_stats: Any) -> tuple[Any, Any, OptimizerReadback | None]:
    """(state, tx, optimizer read-back): a TrainState with its optimizer when training, the variables dict otherwise."""
    if parity.mode != "train":
        return {"params": params, "batch_stats": batch_stats}, None, None
    opt = parity.optimizer
    tx = readback.make_tx(opt)  # coupled L2 then SGD or Adam, hyper-parameters in the state
    state = TrainState(params, batch_stats, jax.jit(tx.init)(params))
    return state, tx, readback.optimizer_readback(opt["name"], state.opt_state, opt.get("nesterov"))


def _place_data(data: Dataset, device_data: bool, shards: ShardPlan | None, mesh: Any, device: Any) -> tuple[Any, Any]:
    """The normalised split: on the device (normalised there; each device its own shard, normalised on the host,
    when data parallel), or host arrays."""
    labels = data.labels.astype(np.int32, copy=False)
    if device_data and shards is None:
        from bench_jax.placement import normalized_on

        return normalized_on(data.images, device), jax.device_put(labels, device)
    images = normalize(data.images)
    if device_data and shards is not None:
        from bench_engine.shards import stacked_shards

        # (devices, shard, ...): each device holds only its own samples, in step order
        return jax.device_put((stacked_shards(images, shards), stacked_shards(labels, shards)), sharded(mesh))
    return images, labels


def _readback(parity: Parity, model: Any, ready: DeviceState, sharded_data: bool, group: int) -> Readback:
    """docs/engine-contract.md: what the built objects say (a traced step for the dtypes)."""
    train = parity.mode == "train"
    held = ready.placed[0]
    shape = tuple(held.shape[2:] if sharded_data else held.shape[1:])  # the split as held
    probe = jax.ShapeDtypeStruct((2, *shape), jnp.dtype(held.dtype))
    traced = readback.traced(model, ready.params, ready.batch_stats, probe, train)
    return Readback(
        mode=parity.mode, arch=parity.arch, input_shape=traced.input_shape, num_classes=traced.num_classes,
        observed=traced.observed, param_dtypes=tuple(sorted({str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(ready.params)})),
        init=ready.init, steps_per_dispatch=group, optimizer=ready.optimizer,
        loss=readback.loss_readback(optax.softmax_cross_entropy_with_integer_labels) if train else None,
    )
