"""Precision policies with the same meaning in every engine, as TensorFlow and Keras apply them.

``bf16``/``fp16`` use Keras mixed policies (fp32 variables; fp16 with dynamic loss scaling, see
bench_tensorflow.optimizer) on either path; ``tf32`` turns on TensorFlow's TF32 execution, which
needs TF32 tensor cores; ``fp32`` turns it off.
"""

from __future__ import annotations

from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.hardware import has_tf32
from bench_engine.precision import PRECISIONS, precision_info
from bench_engine.report import PrecisionReport

KERAS_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}  # compute dtype -> Keras policy
POLICIES = {name: KERAS_POLICIES[info.compute_dtype] for name, info in PRECISIONS.items()}  # name -> Keras policy


def _capability_major(tf: Any) -> int | None:
    """The first GPU's compute-capability major version as TensorFlow reports it (None: not reported)."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    capability = (tf.config.experimental.get_device_details(gpus[0]) or {}).get("compute_capability")
    return int(capability[0]) if capability else None


def check_precision(tf: Any, name: str, kind: str | None) -> None:
    """Refuse a precision the device cannot run: fp16 and tf32 need CUDA, tf32 TF32 tensor cores."""
    info = precision_info(name)
    if info.needs_cuda and kind != "cuda":
        raise UnsupportedError(f"precision {name} needs a CUDA GPU (TF32 and fast fp16 do not exist on CPU)")
    if info.needs_tf32_cores and not has_tf32(_capability_major(tf)):
        raise UnsupportedError("precision tf32 needs TF32 tensor cores (an Ampere or newer GPU)")


def apply_precision(tf: Any, keras: Any, name: str) -> None:
    """TF32 execution on for tf32 only, and the Keras global policy of ``name``."""
    tf.config.experimental.enable_tensor_float_32_execution(precision_info(name).tf32 is True)
    keras.mixed_precision.set_global_policy(POLICIES[name])


def precision_in_effect(tf: Any, keras: Any, name: str, loss_scaling: bool) -> PrecisionReport:
    """The precision policy as TensorFlow and Keras report it now."""
    policy = keras.mixed_precision.global_policy()
    tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    return PrecisionReport(name, str(policy.compute_dtype), str(policy.variable_dtype), tf32, tf32, loss_scaling=loss_scaling)
