"""bench's TensorFlow (Keras 3) engine: ``python -m bench_tensorflow --spec S --result R``."""

from bench_tensorflow.engine import TensorFlowEngine

__all__ = ["TensorFlowEngine"]
