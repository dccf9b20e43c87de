"""Runtimes are discovered as modules: one word, one module each; helper modules are never runtimes."""

from __future__ import annotations

import importlib
import pkgutil

import orchestrator.runtimes as runtimes
from orchestrator.runtimes import get_runtime, is_helper, runtime_modules, runtime_names


def test_helpers_are_not_runtimes() -> None:
    for helper in ("base", "process", "process_guard", "docker_gpus", "docker_limits", "docker_security",
                   "docker_options", "docker_ownership", "docker_watchdog", "slurm_job", "slurm_client", "slurm_follow",
                   "local_settings", "_private"):
        assert is_helper(helper), helper
    for runtime in ("local", "docker", "slurm"):
        assert not is_helper(runtime), runtime
    assert runtime_modules() == ["docker", "local", "slurm"]
    assert runtime_names() == ["docker", "local", "slurm"]
    assert get_runtime("docker").name == "docker"


def test_every_module_is_a_runtime_or_a_helper() -> None:
    """A module defines RUNTIME exactly when discovery takes it for a runtime (none is lost, none mistaken)."""
    for module in pkgutil.iter_modules(runtimes.__path__):
        loaded = importlib.import_module(f"{runtimes.__name__}.{module.name}")
        assert hasattr(loaded, "RUNTIME") == (not is_helper(module.name)), module.name
