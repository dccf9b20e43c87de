"""The in-engine library of bench: the engine contract and the timing harness.

Every framework engine (images/<framework>/) imports this package. It depends on numpy
and the standard library only, so it installs into any framework image.

An engine implements :class:`~bench_engine.api.Engine` and calls :func:`~bench_engine.main.run_engine`
from its ``__main__``; the library reads the run spec, loads and verifies the dataset, drives
the timing harness and writes the engine-result JSON atomically, turning exceptions into a
failed result with a reason.
"""

from bench_engine.api import Engine, StepBatch, Workload
from bench_engine.main import run_engine
from bench_engine.result import ENGINE_LIB_VERSION

__all__ = ["ENGINE_LIB_VERSION", "Engine", "StepBatch", "Workload", "run_engine"]
