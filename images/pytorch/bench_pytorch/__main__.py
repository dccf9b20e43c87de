"""Entrypoint: run one spec with the PyTorch engine."""

import os
import sys

from bench_engine import run_engine
from bench_pytorch import workload
from bench_pytorch.engine import PyTorchEngine

if __name__ == "__main__":
    code = run_engine(PyTorchEngine())
    if workload.TEARDOWN_ABANDONED:
        # a process-group teardown thread is still blocked inside NCCL: the result is written and
        # synced, so leave without the interpreter's shutdown, which could wait on it forever
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
