"""The TensorFlow (Keras 3, TF backend) engine of bench.

Paths: ``baseline`` is what ``Model.fit`` does by default, a ``tf.function`` train step without
XLA; ``optimized`` compiles the whole step with XLA (``jit_compile=True``). Precision is a parity
field: ``bf16``/``fp16`` use Keras mixed policies (fp32 variables, fp16 with dynamic loss
scaling) on either path. Weight decay is coupled L2 (``g + wd * w`` before momentum), as in
PyTorch's SGD. Data is either resident on the device (sliced inside the compiled step) or fed
from host numpy arrays per step, as the spec's ``data_placement`` says.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is first imported

import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench_engine.api import Engine, StepBatch, UnsupportedError, Workload
from bench_engine.data import Dataset, DatasetError, normalize
from bench_tensorflow.model import build_model, count_trainable

POLICIES = {"fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
OPTION_DEFAULTS: dict[str, Any] = {"xla": "auto", "tf_function": True}


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
    return options


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _driver_version() -> str | None:
    """The NVIDIA driver version through NVML, when the bindings and a driver are present."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no NVML: simply unknown
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


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
) -> Callable[..., Any]:
    """The one place a step is built: ``step(start, size)`` on resident data, else ``step(x, y)``.

    Training returns the mean cross-entropy (float32); inference returns the logits. With
    ``resident`` = (images, labels) on the device, ``start`` is an int32 tensor (no retrace per
    step) and ``size`` a Python int (one trace per distinct batch size, i.e. the partial one).
    """
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

    def step(self, batch: StepBatch) -> None:
        if self.resident:
            start = self.starts.get(batch.start)
            if start is None:
                start = self.tf.constant(batch.start, self.tf.int32)
            out = self.step_fn(start, batch.size)
        else:
            end = batch.start + batch.size
            out = self.step_fn(self.host_images[batch.start : end], self.host_labels[batch.start : end])
        self.last = out

    def sync(self) -> None:
        sync_devices = getattr(getattr(self.tf.test, "experimental", None), "sync_devices", None)
        if sync_devices is not None:
            sync_devices()
        elif self.last is not None:  # older TensorFlow: a read back waits for the stream
            self.tf.reduce_sum(self.last).numpy()

    def loss(self) -> float | None:
        if not self.train or self.last is None:
            return None
        return float(self.last.numpy())

    def peak_memory_bytes(self) -> int | None:
        if self.device_kind != "cuda":
            return None
        try:
            return int(self.tf.config.experimental.get_memory_info("GPU:0")["peak"])
        except (ValueError, KeyError):
            return None


class TensorFlowEngine(Engine):
    """bench's TensorFlow engine: hand-built Keras ResNet, custom tf.function / XLA train step."""

    name = "tensorflow"
    framework = "TensorFlow"

    def __init__(self) -> None:
        self.device_kind: str | None = None

    def environment(self, spec: dict[str, Any]) -> dict[str, Any]:
        import keras
        import tensorflow as tf

        self.device_kind = select_device(tf, spec.get("device", "auto"))
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
            for gpu in tf.config.list_physical_devices("GPU"):
                details = tf.config.experimental.get_device_details(gpu)
                names.append(str(details.get("device_name", gpu.name)))
            env["devices"] = names
            env["driver"] = _driver_version()
        else:
            env["devices"] = [_cpu_name()]
        return env

    def prepare(self, spec: dict[str, Any], data: Dataset) -> Workload:
        import keras
        import tensorflow as tf

        if self.device_kind is None:
            self.device_kind = select_device(tf, spec.get("device", "auto"))
        parity = spec["parity"]
        options = _options(spec)
        precision = parity["precision"]
        optimized = spec["path"] == "optimized"
        if parity["devices"] != 1:
            raise UnsupportedError("the TensorFlow engine runs on one device for now (MirroredStrategy not wired yet)")
        if precision in ("fp16", "tf32") and self.device_kind != "cuda":
            raise UnsupportedError(f"precision {precision} needs a CUDA GPU (TF32 and fast fp16 do not exist on CPU)")
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

        with tf.device(device):
            model = build_model(parity["model"]["arch"], int(parity["model"]["num_classes"]), expected_shape)
            optimizer, scaled = None, False
            if train:
                opt = parity["optimizer"]
                optimizer = make_sgd(keras, opt["lr"], opt["momentum"], opt["nesterov"], opt["weight_decay"])
                if precision == "fp16":
                    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
                scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
                optimizer.build(model.trainable_variables)
            images = normalize(data.images)
            labels = data.labels.astype("int32", copy=False)
            placed, starts = None, {}
            if resident:
                placed = (tf.identity(tf.convert_to_tensor(images)), tf.identity(tf.convert_to_tensor(labels)))
                images = None
                # every epoch steps through the same starts: make them once, where the step runs
                batch = parity["batch"]["per_device"]
                starts = {i * batch: tf.identity(tf.constant(i * batch, tf.int32)) for i in range(parity["steps_per_epoch"])}
            step_fn = build_step(
                tf, model, optimizer, train=train, compile_function=compile_function, jit_compile=xla, resident=placed
            )

        weight_decay = bool(train and parity["optimizer"]["weight_decay"])
        optimizations = _optimizations(compile_function, xla, POLICIES[precision], resident, scaled, weight_decay)
        return TensorFlowWorkload(
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
        )

    def is_out_of_memory(self, exc: BaseException) -> bool:
        name = type(exc).__name__
        text = str(exc)
        return name == "ResourceExhaustedError" or "OOM" in text or super().is_out_of_memory(exc)


def _optimizations(
    compile_function: bool, xla: bool, policy: str, resident: bool, scaled: bool, weight_decay: bool
) -> dict[str, dict[str, Any]]:
    """The switches of this run, as ``{name: {applied, detail}}``."""
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
    }


def _str_or_none(value: Any) -> str | None:
    return None if value in (None, "") else str(value)
