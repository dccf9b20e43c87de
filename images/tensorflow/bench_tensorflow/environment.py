"""What the engine sees inside its runtime: the device kind, the devices of a run, TensorFlow's build and versions.

Several devices: the first N GPUs, or on CPU N logical CPU devices split off the host CPU before
TensorFlow initialises (``tf.config.set_logical_device_configuration``). The functions here take
the ``tf`` module, so importing this module does not import TensorFlow.
"""

from __future__ import annotations

from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.hardware import cpu_name
from bench_engine.nvidia import driver_version
from bench_engine.report import EnvironmentFacts
from bench_tensorflow.distributed import all_reduce_name


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


def describe(tf: Any, keras: Any, kind: str, devices: list[str], world: int) -> EnvironmentFacts:
    """The environment block of the result for a run on ``devices`` (of ``kind``)."""
    build = dict(tf.sysconfig.get_build_info())
    extra: dict[str, Any] = {"keras": keras.__version__, "is_cuda_build": bool(build.get("is_cuda_build", False))}
    if world > 1:
        extra["distribute"] = {"strategy": "MirroredStrategy", "devices": devices, "all_reduce": all_reduce_name(kind)}
    # the GPUs' names, or the logical CPU devices of one host CPU (world > 1)
    names = _gpu_names(tf, world) if kind == "cuda" else [cpu_name()] * world
    return EnvironmentFacts(framework_version=tf.__version__, cuda=_str_or_none(build.get("cuda_version")),
                            cudnn=_str_or_none(build.get("cudnn_version")), driver=driver_version() if kind == "cuda" else None,
                            device_kind=kind, devices=tuple(names), extra=extra)


def _gpu_names(tf: Any, world: int) -> list[str]:
    """The names of the run's GPUs (every visible GPU on one device)."""
    names = []
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus[:world] if world > 1 else gpus:
        details = tf.config.experimental.get_device_details(gpu)
        names.append(str(details.get("device_name", gpu.name)))
    return names


def _str_or_none(value: Any) -> str | None:
    return None if value in (None, "") else str(value)
