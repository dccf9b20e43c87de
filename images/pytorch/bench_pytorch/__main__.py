"""Entrypoint: run one spec with the PyTorch engine."""

import sys

from bench_engine import run_engine
from bench_pytorch.engine import PyTorchEngine

if __name__ == "__main__":
    sys.exit(run_engine(PyTorchEngine()))
