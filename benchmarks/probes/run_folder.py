"""What the JAX probes start from: a run folder's spec (made by ``bench scenario run``) and bench's own workload for it."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any


def put_engines_on_path(names: tuple[str, ...] = ("pytorch", "jax")) -> None:
    """Put each engine's folders (``images/common`` and its adapter) on ``sys.path``, the folders bench's runtime puts
    on an engine's PYTHONPATH (``EngineInfo.python_path``): a probe runs with whatever PYTHONPATH its caller has
    (session 9's campaign had the tree and ``images/common`` only, and both profiles failed on ``bench_pytorch``)."""
    from orchestrator.engines.registry import get_engine

    for name in names:
        for folder in map(str, get_engine(name).python_path()):
            if folder not in sys.path:
                sys.path.insert(0, folder)


def use_bench_compile_caches() -> None:
    """The persistent compilation caches bench's local runtime gives its engines (Inductor/Triton, JAX/XLA), unless
    set, called by a probe's ``main`` (never at import: importing a probe leaves the caller's environment as it is):
    a probe of a run's spec then finds what the run compiled and autotuned (session 19's profile of a max-autotune
    run, without them, autotuned every operation again: 8 min on an H100)."""
    from orchestrator.runtimes.local import compile_cache_env

    for key, value in compile_cache_env().items():
        os.environ.setdefault(key, value)


put_engines_on_path()

from bench_engine.contract import RunSpec  # noqa: E402  (its folder is put on sys.path first)


def read_spec(spec_path: Path) -> RunSpec:
    """A run folder's ``spec.json`` as the engine reads it, its shared-weights file named by its path beside the spec."""
    return RunSpec.from_json(json.loads(spec_path.read_text())).with_init_relative_to(spec_path.parent)


def with_options(spec: RunSpec, options: Mapping[str, Any]) -> RunSpec:
    """``spec`` with engine options changed (on top of its own)."""
    return replace(spec, engine_options={**spec.engine_options, **options})


def build_jax_workload(spec: RunSpec) -> tuple[Any, str, list[Any], float]:
    """(workload, device kind, devices, setup seconds): the process configured, the dataset loaded, the workload built."""
    from bench_engine.data import load_dataset
    from bench_jax.environment import configure_process, resolve_devices
    from bench_jax.prepare import build_workload

    configure_process(spec)
    kind, devices = resolve_devices(spec.device)
    data = load_dataset(spec.parity.dataset.path, spec.parity.dataset.sha256)
    began = time.perf_counter()
    workload = build_workload(spec, data, kind, devices)
    return workload, kind, devices, time.perf_counter() - began
