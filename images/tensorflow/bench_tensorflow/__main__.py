"""Entrypoint: ``python -m bench_tensorflow --spec SPEC.json --result RESULT.json``."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before anything imports TensorFlow

from bench_engine import run_engine
from bench_tensorflow.engine import TensorFlowEngine

if __name__ == "__main__":
    sys.exit(run_engine(TensorFlowEngine()))
