"""Entrypoint: ``python -m bench_fakedp --spec SPEC.json --result RESULT.json``."""

import sys

from bench_engine import run_engine
from bench_fakedp import FakeDPEngine

if __name__ == "__main__":
    sys.exit(run_engine(FakeDPEngine()))
