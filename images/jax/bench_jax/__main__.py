"""Entrypoint: ``python -m bench_jax --spec SPEC.json --result RESULT.json``."""

import sys

from bench_engine import run_engine
from bench_jax.engine import JaxEngine

if __name__ == "__main__":
    sys.exit(run_engine(JaxEngine()))
