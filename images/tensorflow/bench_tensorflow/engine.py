"""The TensorFlow (Keras 3, TF backend) engine adapter. TensorFlow is imported inside the methods, so setup time covers it.

The step is custom (bench_tensorflow.step): a ``tf.function``, XLA-compiled on the optimized path;
several devices train under ``tf.distribute.MirroredStrategy`` (bench_tensorflow.distributed).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is first imported


from bench_engine.api import Engine, Workload
from bench_engine.contract import RunSpec
from bench_engine.data import Dataset
from bench_engine.report import EnvironmentFacts


class TensorFlowEngine(Engine):
    """bench's TensorFlow engine: hand-built Keras ResNet, custom tf.function / XLA train step."""

    name = "tensorflow"
    framework = "TensorFlow"

    def __init__(self) -> None:
        self.device_kind: str | None = None
        self.devices: list[str] = []

    def environment(self, spec: RunSpec) -> EnvironmentFacts:
        import keras
        import tensorflow as tf

        from bench_tensorflow.environment import configure_devices, describe, select_device

        self.device_kind = select_device(tf, spec.device)
        world = spec.parity.devices
        self.devices = configure_devices(tf, self.device_kind, world)
        return describe(tf, keras, self.device_kind, self.devices, world)

    def prepare(self, spec: RunSpec, data: Dataset) -> Workload:
        import keras
        import tensorflow as tf

        from bench_tensorflow.environment import configure_devices, select_device
        from bench_tensorflow.prepare import build_workload

        if self.device_kind is None:
            self.device_kind = select_device(tf, spec.device)
            self.devices = configure_devices(tf, self.device_kind, spec.parity.devices)
        return build_workload(spec, data, tf, keras, self.device_kind, self.devices)

    def is_out_of_memory(self, exc: BaseException) -> bool:
        name = type(exc).__name__
        text = str(exc)
        return name == "ResourceExhaustedError" or "OOM" in text or super().is_out_of_memory(exc)
