"""Runtimes, discovered from the modules of this package (each defines RUNTIME = <class>)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from orchestrator.errors import BadInput
from orchestrator.runtimes.base import Execution, LineSink, RunPaths, Runtime

__all__ = ["Execution", "LineSink", "RunPaths", "Runtime", "get_runtime", "runtime_names"]


@cache
def _registry() -> dict[str, type[Runtime]]:
    found: dict[str, type[Runtime]] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name in {"base", "process"} or module.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{module.name}")
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
