"""The JAX engine: Flax ResNet, Optax SGD, jitted steps with asynchronous dispatch.

Paths: ``baseline`` jits forward+backward only and applies the Optax update eagerly outside
the jit (framework defaults); ``optimized`` jits the whole train step (forward, backward,
optimizer update, batch-norm statistics) and donates the state buffers. Data placement
follows the spec: ``device`` keeps the normalised split on the device and slices each batch
inside the jitted step (traced start, so one compilation per batch size); ``host`` slices
numpy batches and transfers them every step.

Several steps per call (option ``steps_per_dispatch``; auto: the timing window on a GPU's
optimized path with device data, 1 on a CPU): full batches are queued and run ``K`` at a time by
one jitted ``lax.scan`` over their batch starts (a small step is bound by the host issuing its
kernels; one call per window removes the per-step dispatch). With device data every shape the
run will dispatch (:func:`planned_calls`, from the harness's schedule) is compiled ahead of time
in ``prepare``, so none compiles inside the warmup or a timed window.

Several devices (data parallel, one process): a 1-D ``Mesh`` of the devices with axis
``data``; every global batch is laid out as ``(devices, share, ...)`` with
``NamedSharding(mesh, P('data'))`` (device ``r`` holds samples ``start + r*share ..``, see
bench_engine.shards), parameters, batch statistics and optimizer state are replicated
(``P()``), and the step is ``jax.vmap``-ed over the device axis, so each device normalises its
own share (per-device BatchNorm statistics, as DDP and MirroredStrategy) while the gradient of
the global mean loss with respect to the replicated parameters is all-reduced by XLA (jit with
shardings). On CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` is set before JAX
is imported, so the host shows N devices; on GPUs the first N visible GPUs are used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from bench_engine.api import LOSS_STEPS, Engine, StepBatch, UnsupportedError, Workload
from bench_engine.data import Dataset, DatasetError, normalize
from bench_engine.dispatch import StepQueue, planned_dispatches
from bench_engine.hardware import cpu_name, cuda_version_text, cudnn_version_text, has_tf32
from bench_engine.nvidia import driver_version

PRECISIONS = ("fp32", "tf32", "bf16")


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


def _option(options: dict[str, Any], name: str, default: Any) -> Any:
    value = options.get(name, default)
    return default if value == "auto" else value


# ----------------------------------------------------------------------------- step construction


def build_step(model: Any, tx: Any, config: StepConfig, mesh: Any = None) -> Callable[..., Any]:
    """Build the step for ``config``.

    Train: ``step(state, data, where) -> (state, loss)``; infer: ``step(variables, data, where) -> logits``.
    ``data`` is ``(images, labels)``: the whole split on the device (``where`` = traced start
    index) or the batch itself (``where`` unused). With ``config.world > 1`` every array of
    ``data`` has a leading device axis sharded over ``mesh`` (axis ``data``), the step runs
    vmapped over it and its state outputs stay replicated.
    """
    import jax
    import jax.numpy as jnp
    import optax
    from jax import lax

    size = config.size
    parallel = config.world > 1
    replicated = _replicated(mesh) if parallel else None

    def fetch(data: tuple[Any, Any], where: Any) -> tuple[Any, Any]:
        images, labels = data
        if config.device_data:
            axis = 1 if parallel else 0  # the batch axis, after the device axis when data parallel
            images = lax.dynamic_slice_in_dim(images, where, size, axis=axis)
            labels = lax.dynamic_slice_in_dim(labels, where, size, axis=axis)
        return images, labels

    if config.mode == "infer":

        def infer(variables: Any, data: tuple[Any, Any], where: Any) -> Any:
            images, _ = fetch(data, where)
            if parallel:
                return jax.vmap(lambda x: model.apply(variables, x, train=False))(images)
            return model.apply(variables, images, train=False)

        return jax.jit(infer)

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

    def apply_update(state: TrainState, grads: Any, new_stats: Any) -> TrainState:
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        return TrainState(optax.apply_updates(state.params, updates), new_stats, opt_state)

    if config.full_step and config.steps > 1:

        def train_steps(state: TrainState, data: tuple[Any, Any], starts: Any) -> tuple[TrainState, Any]:
            """``len(starts)`` full SGD steps, one per batch start, in order; the loss of the last."""

            def one(carry: TrainState, where: Any) -> tuple[TrainState, Any]:
                loss, grads, new_stats = loss_and_grads(carry.params, carry.batch_stats, *fetch(data, where))
                updated = apply_update(carry, grads, new_stats)
                # the carry keeps its dtypes (an optimizer's count or a statistic may promote under x64)
                return jax.tree.map(lambda new, old: new.astype(old.dtype), updated, carry), loss

            state, losses = lax.scan(one, state, starts)
            return state, losses  # every step's loss (the first K go into the result)

        donate = (0,) if config.donate else ()
        if parallel:
            return jax.jit(train_steps, donate_argnums=donate, out_shardings=(replicated, replicated))
        return jax.jit(train_steps, donate_argnums=donate)

    if config.full_step:

        def train_step(state: TrainState, data: tuple[Any, Any], where: Any) -> tuple[TrainState, Any]:
            loss, grads, new_stats = loss_and_grads(state.params, state.batch_stats, *fetch(data, where))
            return apply_update(state, grads, new_stats), loss

        donate = (0,) if config.donate else ()
        if parallel:
            return jax.jit(train_step, donate_argnums=donate, out_shardings=(replicated, replicated))
        return jax.jit(train_step, donate_argnums=donate)

    def forward_backward(params: Any, batch_stats: Any, data: tuple[Any, Any], where: Any) -> tuple[Any, Any, Any]:
        return loss_and_grads(params, batch_stats, *fetch(data, where))

    donate = (1,) if config.donate else ()
    if parallel:
        grad_fn = jax.jit(forward_backward, donate_argnums=donate, out_shardings=replicated)
    else:
        grad_fn = jax.jit(forward_backward, donate_argnums=donate)

    def eager_step(state: TrainState, data: tuple[Any, Any], where: Any) -> tuple[TrainState, Any]:
        loss, grads, new_stats = grad_fn(state.params, state.batch_stats, data, where)
        return apply_update(state, grads, new_stats), loss  # op by op, outside the jit

    return eager_step


def _replicated(mesh: Any) -> Any:
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec())


def _sharded(mesh: Any) -> Any:
    """The leading (device) axis split over the mesh's ``data`` axis."""
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec("data"))


# ----------------------------------------------------------------------------- workload


@dataclass
class JaxWorkload(Workload):
    """Model state, data and compiled steps (one per batch size); steps dispatch asynchronously."""

    mode: str = "train"
    model: Any = None
    tx: Any = None
    state: Any = None  # TrainState (train) or the variables dict (infer)
    data: Any = None  # (images, labels): on the device, or host numpy arrays
    device: Any = None
    step_config: StepConfig | None = None
    mesh: Any = None  # data parallel: the 1-D device mesh (axis 'data')
    shards: Any = None  # data parallel: bench_engine.shards.ShardPlan
    steps_per_dispatch: int = 1  # >1: full batches are queued and dispatched that many per jitted call
    _steps: dict[tuple[int, int], Callable[..., Any]] = field(default_factory=dict)
    _starts: dict[Any, Any] = field(default_factory=dict)
    _queue: StepQueue | None = None
    _last: Any = None  # latest loss (train) or logits (infer); a vector of losses after a several-step call
    _history: list[Any] = field(default_factory=list)  # the first LOSS_STEPS losses, on the device

    def precompile(self, calls: set[tuple[int, int]]) -> None:
        """Compile every (per-device batch, steps per call) the run will dispatch, before timing starts.

        Device-resident data only (the inputs' shapes are known: the placed split and the start
        indices). The compiled executables are called directly, so no shape ever compiles inside
        the warmup or the steady state, a kept partial batch and a short queue included.
        """
        for size, steps in sorted(calls):
            fn = self._step_fn(size, steps)
            if not hasattr(fn, "lower"):  # the baseline's eager update around a jitted forward/backward: compiles on first use
                continue
            where = self._on_device(np.zeros((steps,), np.int32) if steps > 1 else np.int32(0))
            self._steps[(size, steps)] = fn.lower(self.state, self.data, where).compile()

    def _step_fn(self, size: int, steps: int = 1) -> Callable[..., Any]:
        fn = self._steps.get((size, steps))
        if fn is None:
            assert self.step_config is not None
            config = replace(self.step_config, size=size, steps=steps)
            fn = self._steps[(size, steps)] = build_step(self.model, self.tx, config, self.mesh)
        return fn

    def _local_start(self, batch: StepBatch) -> int:
        return self.shards.local(batch).start if self.shards is not None else batch.start

    def _on_device(self, value: Any) -> Any:
        import jax

        return jax.device_put(value, _replicated(self.mesh) if self.shards is not None else self.device)

    def _inputs(self, batch: StepBatch) -> tuple[Any, Any]:
        import jax

        assert self.step_config is not None
        parallel = self.shards is not None
        if self.step_config.device_data:
            start = self._local_start(batch)
            where = self._starts.get(start)
            if where is None:
                where = self._starts[start] = self._on_device(np.int32(start))
            return self.data, where
        images, labels = self.data
        stop = batch.start + batch.size
        images, labels = images[batch.start : stop], labels[batch.start : stop]
        if parallel:  # (devices, share, ...): device r gets samples start + r*share ..
            world = self.shards.world
            batch_in = (images.reshape(world, -1, *images.shape[1:]), labels.reshape(world, -1))
            return jax.device_put(batch_in, _sharded(self.mesh)), None
        return jax.device_put((images, labels), self.device), None

    def __post_init__(self) -> None:
        full = (self.step_config.size if self.step_config else 0) * self.world_size
        self._queue = StepQueue(self.steps_per_dispatch, full, self._dispatch, self._dispatch_several)

    def step(self, batch: StepBatch) -> None:
        assert self._queue is not None
        self._queue.push(batch)  # full batches wait for the next ones; sync() runs a shorter queue

    def _dispatch(self, batch: StepBatch) -> None:
        data, where = self._inputs(batch)
        fn = self._step_fn(batch.size // self.world_size)
        if self.mode == "infer":
            self._last = fn(self.state, data, where)
        else:
            self.state, self._last = fn(self.state, data, where)
            self._remember(1)

    def _remember(self, steps: int) -> None:
        """Keep the loss output(s) of the first LOSS_STEPS steps (device arrays: no synchronisation)."""
        if sum(int(np.size(h)) for h in self._history) < LOSS_STEPS:
            self._history.append(self._last)

    def losses(self) -> list[float]:
        values = [float(v) for h in self._history for v in np.atleast_1d(np.asarray(h))]
        return values[:LOSS_STEPS]

    def _dispatch_several(self, batches: list[StepBatch]) -> None:
        """``steps_per_dispatch`` full batches in one call of the multi-step function."""
        assert self.step_config is not None
        key = tuple(self._local_start(batch) for batch in batches)
        starts = self._starts.get(key)
        if starts is None:
            starts = self._starts[key] = self._on_device(np.asarray(key, dtype=np.int32))
        fn = self._step_fn(self.step_config.size, len(batches))
        self.state, self._last = fn(self.state, self.data, starts)
        self._remember(len(batches))

    def sync(self) -> None:
        import jax

        assert self._queue is not None
        self._queue.flush()
        jax.block_until_ready((self.state, self._last))

    def loss(self) -> float | None:
        if self.mode != "train" or self._last is None:
            return None
        return float(np.atleast_1d(np.asarray(self._last))[-1])

    def peak_memory_bytes(self) -> int | None:
        """The device's peak (the largest over the mesh's devices when data parallel)."""
        peaks = []
        for device in (list(self.mesh.devices.flat) if self.mesh is not None else [self.device]):
            try:
                stats = device.memory_stats()
            except Exception:
                continue
            peak = (stats or {}).get("peak_bytes_in_use", (stats or {}).get("bytes_in_use"))
            if peak is not None:
                peaks.append(int(peak))
        return max(peaks) if peaks else None


# ----------------------------------------------------------------------------- engine


def _configure_process(spec: dict[str, Any]) -> None:
    """Environment that must be set before JAX initialises its backends."""
    options = spec.get("engine_options") or {}
    if options.get("xla_flags"):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {options['xla_flags']}".strip()
    devices = int((spec.get("parity") or {}).get("devices", 1))
    if devices > 1 and spec.get("device", "auto") != "cuda" and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        # N host devices for a data-parallel run on the CPU (before jax is imported; the flag only
        # shapes the host platform, so an auto run that finds GPUs is not affected)
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    if "preallocate" in options:
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true" if options["preallocate"] else "false"
    if spec.get("device") == "cpu":
        import jax

        jax.config.update("jax_platforms", "cpu")


def _resolve_devices(kind: str) -> tuple[str, list[Any]]:
    """('cuda' | 'cpu', the JAX devices of that platform) for the spec's device request."""
    import jax

    if kind in ("auto", "cuda"):
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if gpus:
            return "cuda", gpus
        if kind == "cuda":
            raise UnsupportedError("device 'cuda' requested but JAX sees no GPU (CPU-only jaxlib or no device)")
    return "cpu", jax.devices("cpu")


def _cuda_versions() -> tuple[str | None, str | None]:
    try:
        from jax._src.lib import cuda_versions  # private, but what jax itself uses
    except ImportError:
        return None, None
    if cuda_versions is None:
        return None, None
    out: list[str | None] = []
    for getter, cudnn in (("cuda_runtime_get_version", False), ("cudnn_get_version", True)):
        try:
            out.append((cudnn_version_text if cudnn else cuda_version_text)(getattr(cuda_versions, getter)()))
        except Exception:
            out.append(None)
    return out[0], out[1]


def _tf32_capable(kind: str, devices: list[Any]) -> bool:
    """Whether the device has TF32 tensor cores (NVIDIA compute capability 8.0 or newer)."""
    if kind != "cuda" or not devices:
        return False
    return has_tf32(getattr(devices[0], "compute_capability", None))


@dataclass(frozen=True)
class PrecisionPolicy:
    """What a precision name means here: compute dtype, conv/dense precision, TF32 in effect."""

    name: str
    compute_dtype: str  # float32 | bfloat16 (parameters are always float32)
    highest: bool  # conv and dense at lax.Precision.HIGHEST (true fp32, TF32 off)
    tf32: bool  # float32 convs/matmuls may use TF32 tensor cores

    def report(self) -> dict[str, Any]:
        """The result's precision block."""
        return {"name": self.name, "compute_dtype": self.compute_dtype, "param_dtype": "float32",
                "tf32_matmul": self.tf32, "tf32_conv": self.tf32, "loss_scaling": False}


def precision_policy(name: str, kind: str, devices: list[Any]) -> PrecisionPolicy:
    """fp32: HIGHEST precision; tf32: the backend default (TF32 on Ampere+ GPUs, plain fp32 on CPU);
    bf16: bfloat16 compute with float32 parameters, what stays float32 at the backend default."""
    if name not in PRECISIONS:
        raise UnsupportedError(f"precision {name!r} unsupported by the jax engine (supported: {', '.join(PRECISIONS)})")
    if name == "fp32":
        return PrecisionPolicy(name, "float32", highest=True, tf32=False)
    if name == "tf32" and not _tf32_capable(kind, devices):
        # The same rule in every engine: tf32 names TF32 tensor-core math, which only exists on CUDA GPUs of
        # compute capability 8.0+; running fp32 under that name would mislabel the result.
        raise UnsupportedError("precision 'tf32' needs a CUDA GPU with TF32 tensor cores (compute capability 8.0+)")
    return PrecisionPolicy(name, "bfloat16" if name == "bf16" else "float32", highest=False, tf32=_tf32_capable(kind, devices))


class JaxEngine(Engine):
    """Flax + Optax ResNet training and inference under ``jax.jit``."""

    name = "jax"
    framework = "JAX"

    def __init__(self) -> None:
        self._kind: str | None = None
        self._devices: list[Any] = []

    def _devices_for(self, spec: dict[str, Any]) -> tuple[str, list[Any]]:
        if self._kind is None:
            _configure_process(spec)
            self._kind, self._devices = _resolve_devices(spec.get("device", "auto"))
        return self._kind, self._devices

    def is_out_of_memory(self, exc: BaseException) -> bool:
        """XLA's RESOURCE_EXHAUSTED / out of memory, also when wrapped in another exception."""
        seen: BaseException | None = exc
        for _ in range(5):
            if seen is None:
                return False
            if super().is_out_of_memory(seen):
                return True
            seen = seen.__cause__ or seen.__context__
        return False

    def environment(self, spec: dict[str, Any]) -> dict[str, Any]:
        import jax
        import jaxlib

        kind, devices = self._devices_for(spec)
        cuda, cudnn = _cuda_versions() if kind == "cuda" else (None, None)
        extra: dict[str, Any] = {"jaxlib": getattr(jaxlib, "__version__", None)}
        for module in ("flax", "optax"):
            try:
                extra[module] = __import__(module).__version__
            except ImportError:
                extra[module] = None
        try:
            extra["platform_version"] = devices[0].client.platform_version
        except Exception:
            pass
        if kind == "cuda":
            extra["compute_capability"] = getattr(devices[0], "compute_capability", None)
        if os.environ.get("XLA_FLAGS"):
            extra["xla_flags"] = os.environ["XLA_FLAGS"]
        names = [d.device_kind for d in devices]
        if kind == "cpu":
            names = [cpu_name() for d in devices]
        return {
            "framework": self.framework,
            "framework_version": jax.__version__,
            "cuda": cuda,
            "cudnn": cudnn,
            "driver": driver_version() if kind == "cuda" else None,
            "device_kind": kind,
            "devices": names,
            "extra": extra,
        }

    def prepare(self, spec: dict[str, Any], data: Dataset) -> Workload:
        import jax
        import jax.numpy as jnp
        import optax
        from jax import lax

        from bench_engine.initweights import resolve_init
        from bench_jax.model import build_model, count_parameters
        from bench_jax.readback import load_shared, loss_readback, make_tx, optimizer_readback, shared_sha256, traced

        parity = spec["parity"]
        options = spec.get("engine_options") or {}
        kind, devices = self._devices_for(spec)
        precision = parity["precision"]
        world = int(parity["devices"])
        if len(devices) < world:
            raise UnsupportedError(f"{world} devices requested but JAX sees {len(devices)} {kind} device(s)")
        if parity["optimizer"]["name"] not in ("sgd", "adam") or parity["loss"] != "cross_entropy":
            raise UnsupportedError(f"optimizer {parity['optimizer']['name']!r} / loss {parity['loss']!r} not supported")
        geometry = (parity["input"]["height"], parity["input"]["width"], parity["input"]["channels"])
        if tuple(data.images.shape[1:]) != geometry:
            raise DatasetError(f"dataset images are {tuple(data.images.shape[1:])}, the spec's input is {geometry}")
        device = devices[0]
        mesh = shards = None
        if world > 1:
            from jax.sharding import Mesh

            from bench_engine.shards import plan_shards

            shards = plan_shards(spec, data.samples)
            mesh = Mesh(np.array(devices[:world]), ("data",))
        mode = parity["mode"]
        optimized = spec["path"] == "optimized"
        device_data = parity["data_placement"] == "device"
        donate = bool(_option(options, "donate", optimized)) and mode == "train"

        policy = precision_policy(precision, kind, devices)
        if precision == "fp32":
            jax.config.update("jax_default_matmul_precision", "highest")  # also for any matmul outside the layers
        compute_dtype = jnp.dtype(policy.compute_dtype)
        layer_precision = lax.Precision.HIGHEST if policy.highest else None

        model = build_model(parity["model"]["arch"], parity["model"]["num_classes"], dtype=compute_dtype,
                            param_dtype=jnp.float32, precision=layer_precision)
        with jax.default_device(device):
            key = jax.random.PRNGKey(parity["seed"])
            sample = jnp.zeros((1, *geometry), jnp.float32)
            variables = jax.jit(lambda k: model.init(k, sample, train=False))(key)
            params, batch_stats = variables["params"], variables["batch_stats"]
            init_file = resolve_init(spec, None)
            init = {"mode": "framework", "sha256": None}
            if init_file is not None:  # bench's shared weights replace the initialiser's
                if parity["model"]["arch"] != "resnet50_v1.5":
                    raise UnsupportedError(f"shared initial weights: no layout for {parity['model']['arch']}")
                params, batch_stats = jax.device_put(load_shared(str(init_file), params, batch_stats), device)
                init = {"mode": "shared", "sha256": shared_sha256(str(init_file), params, batch_stats)}
            trainable = count_parameters(params)
            tx = None
            optimizer_back = None
            if mode == "train":
                opt = parity["optimizer"]
                tx = make_tx(opt)  # coupled L2 then SGD or Adam, hyper-parameters in the state
                state: Any = TrainState(params, batch_stats, jax.jit(tx.init)(params))
                optimizer_back = optimizer_readback(opt["name"], state.opt_state, opt.get("nesterov"))
            else:
                state = {"params": params, "batch_stats": batch_stats}

            images = normalize(data.images)
            labels = data.labels.astype(np.int32, copy=False)
            if device_data and shards is not None:
                from bench_engine.shards import stacked_shards

                # (devices, shard, ...): each device holds only its own samples, in step order
                placed: Any = jax.device_put((stacked_shards(images, shards), stacked_shards(labels, shards)), _sharded(mesh))
                images = None
            elif device_data:
                placed = (jax.device_put(images, device), jax.device_put(labels, device))
            else:
                placed = (images, labels)
            # commit every buffer to the device(s): uncommitted inputs would make the second step recompile
            state = jax.device_put(state, _replicated(mesh) if mesh is not None else device)
            jax.block_until_ready((state, placed))

        step_config = StepConfig(mode=mode, full_step=optimized, donate=donate, device_data=device_data,
                                 size=parity["batch"]["per_device"], world=world)
        group = _steps_per_dispatch(options, step_config, kind, spec["measurement"]["window_steps"])
        workload = JaxWorkload(
            trainable_parameters=trainable,
            precision=policy.report(),
            data_placement=parity["data_placement"],
            optimizations=_optimizations(step_config, os.environ.get("XLA_FLAGS", ""), kind, shards, group),
            world_size=world,
            mesh=mesh,
            shards=shards,
            mode=mode,
            model=model,
            tx=tx,
            state=state,
            data=placed,
            device=device,
            step_config=step_config,
            steps_per_dispatch=group,
        )
        held = placed[0]
        workload.data_placement = "device" if isinstance(held, jax.Array) else "host"  # read back: what holds the split
        shape = tuple(held.shape[2:] if shards is not None and device_data else held.shape[1:])  # the split as held
        traced_step = traced(model, params, batch_stats, jax.ShapeDtypeStruct((2, *shape), jnp.dtype(held.dtype)), mode == "train")
        workload.readback = {
            "mode": mode, "arch": parity["model"]["arch"], **traced_step,
            "param_dtypes": sorted({str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(params)}),
            "init": init, "steps_per_dispatch": group, "optimizer": optimizer_back,
            "loss": loss_readback(optax.softmax_cross_entropy_with_integer_labels) if mode == "train" else None,
        }
        workload.precision = {**workload.precision, "param_dtype": ",".join(workload.readback["param_dtypes"])}
        if device_data:
            workload.precompile(planned_calls(spec, data.samples, world, group))
        return workload


def planned_calls(spec: dict[str, Any], samples: int, world: int, group: int) -> set[tuple[int, int]]:
    """The (per-device batch, steps per call) pairs :class:`JaxWorkload` dispatches over the harness's schedule."""
    return {(size // world, len(starts)) for size, starts in planned_dispatches(spec, samples, group, world)}


def _steps_per_dispatch(options: dict[str, Any], config: StepConfig, kind: str, window_steps: int) -> int:
    """Training steps per jitted call: the option (default 1; it never follows the timing window).

    Only a whole jitted train step on device-resident data can be scanned over batch starts; any
    other configuration runs one step per call whatever the option says (reported as not applied).
    A group longer than the timing window never fills (every window ends with a sync that runs a
    short queue step by step), so choose a divisor of measurement.window_steps.
    """
    value = options.get("steps_per_dispatch", 1)
    if not (config.mode == "train" and config.full_step and config.device_data):
        return 1
    return 1 if value == "auto" else max(1, int(value))


def _optimizations(config: StepConfig, xla_flags: str, kind: str = "cpu", shards: Any = None,
                   group: int = 1) -> dict[str, dict[str, Any]]:
    """The switches in effect, as {name: {applied, detail}}."""
    infer = config.mode == "infer"
    if infer:
        jit_detail = "forward pass (running batch-norm statistics) under jax.jit"
    elif config.full_step:
        jit_detail = "whole train step under one jax.jit: forward, backward, optax update, batch-norm statistics"
    else:
        jit_detail = "forward+backward (value_and_grad) under jax.jit; optax update applied eagerly outside"
    donation = "no buffer donation"
    if config.donate:
        donation = ("params, batch stats and optimizer state donated to the step (donate_argnums)" if config.full_step
                    else "batch stats donated to the jitted forward/backward (donate_argnums)")
    return {
        "jit": {"applied": True, "detail": jit_detail},
        "jit_full_step": {"applied": config.full_step and not infer, "detail": "optimizer update fused into the jitted step"},
        "donation": {"applied": config.donate, "detail": donation},
        "device_resident_data": {"applied": config.device_data,
                                 "detail": "normalised split on the device, batch sliced in the step (lax.dynamic_slice)"
                                 if config.device_data else "numpy batches sliced on the host, transferred every step"},
        "nhwc_layout": {"applied": True, "detail": "Flax convolutions are NHWC"},
        "xla_flags": {"applied": bool(xla_flags), "detail": xla_flags or "XLA defaults"},
        "steps_per_dispatch": {"applied": group > 1,
                               "detail": f"{group} full SGD steps per jitted call (lax.scan over their batch starts; "
                                         "a shorter queue at a sync runs step by step)" if group > 1
                               else "one step per jitted call"},
        "data_parallel": _data_parallel(config, kind, shards),
    }


def _data_parallel(config: StepConfig, kind: str, shards: Any) -> dict[str, Any]:
    if config.world == 1 or shards is None:
        return {"applied": False, "detail": "one device"}
    share = shards.per_device
    placement = (f"each device holds its own shard ({shards.shard_samples} samples, P('data'))" if config.device_data
                 else "each global batch transferred as (devices, share, ...) with P('data')")
    grads = "; gradients all-reduced by XLA" if config.mode == "train" else ""
    return {"applied": True,
            "detail": f"jit over a 1-D Mesh of {config.world} {kind} devices (axis 'data'): device r takes samples start + r*{share} "
                      f".. + {share} of every global batch of {shards.global_batch}; {placement}; parameters and optimizer state "
                      f"replicated (P()); step vmapped over the device axis (BatchNorm statistics per device){grads}"}
