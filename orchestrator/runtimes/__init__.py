"""Runtimes, discovered from the modules of this package: a runtime is one module named by one
word (``local``, ``docker``, ``slurm``) that defines ``RUNTIME = <class>``.

Helpers are never taken for runtimes: ``base`` and ``process``, and every module whose name
has an underscore (``<runtime>_<job>`` such as ``docker_gpus`` or ``slurm_job``; ``_private``).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from orchestrator.errors import BadInput
from orchestrator.runtimes.base import Execution, LineSink, PlannedRun, RunPaths, Runtime
from orchestrator.runtimes.engine_settings import RuntimeSettings
from orchestrator.runtimes.runtime_facts import RuntimeFacts

__all__ = ["Execution", "LineSink", "PlannedRun", "RunPaths", "Runtime", "RuntimeFacts", "RuntimeSettings", "get_runtime", "runtime_names"]


SHARED_HELPERS = frozenset({"base", "process"})


def is_helper(module: str) -> bool:
    """Whether module ``module`` of this package is a helper (skipped by discovery), not a runtime."""
    return module in SHARED_HELPERS or "_" in module


def runtime_modules() -> list[str]:
    """The modules of this package that are runtimes (helpers left out), by name."""
    return sorted(module.name for module in pkgutil.iter_modules(__path__) if not is_helper(module.name))


@cache
def _registry() -> dict[str, type[Runtime]]:
    found: dict[str, type[Runtime]] = {}
    for name in runtime_modules():
        mod = importlib.import_module(f"{__name__}.{name}")
        cls = getattr(mod, "RUNTIME", None)
        if cls is not None:
            found[cls.name] = cls
    return found


def runtime_names() -> list[str]:
    return sorted(_registry())


def get_runtime(name: str) -> Runtime:
    registry = _registry()
    if name not in registry:
        raise BadInput(f"--runtime: unknown runtime '{name}' (choose from auto, {', '.join(sorted(registry))})")
    return registry[name]()
