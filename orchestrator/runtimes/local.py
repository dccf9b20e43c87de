"""The local runtime: the engine entrypoint as a subprocess in the engine's Python environment
(which, for a one-process-per-device engine, starts the workers itself)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchestrator.engines.registry import EngineInfo
from orchestrator.envvars import refuse_internal, without_internal
from orchestrator.errors import BadInput
from orchestrator.host.gpus import visible_ids
from orchestrator.runtimes.base import Execution, LineSink, RunPaths, Runtime
from orchestrator.runtimes.engine_settings import RuntimeSettings
from orchestrator.runtimes.local_settings import LocalSettings
from orchestrator.runtimes.process import run_streamed
from orchestrator.runtimes.runtime_facts import RuntimeFacts

# Kept in every worker's environment: NVLink multicast must stay off on shared multi-GPU hosts.
PARENT_ENV = "BENCH_PARENT_PID"  # = bench_engine.lifeline.PARENT_ENV
FIXED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1"}


def compile_cache_env() -> dict[str, str]:
    """Persistent compilation caches shared by every run (Inductor/Triton, JAX/XLA, TF/XLA), unless already set."""
    root = Path(os.environ.get("BENCH_COMPILE_CACHE") or Path.home() / ".cache" / "bench" / "compile")
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "TRITON_CACHE_DIR": str(root / "triton"),
        "JAX_COMPILATION_CACHE_DIR": str(root / "jax"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={root / 'tf-xla'}",
    }


def resolve_interpreter(engine: EngineInfo, cfg: LocalSettings) -> str:
    """--python / engines.<name>.interpreter / a bench-managed env / the current interpreter."""
    from orchestrator.engines.venvs import managed_interpreter

    chosen = cfg.interpreter or managed_interpreter(engine.name) or sys.executable
    found = shutil.which(chosen) if os.sep not in chosen else (chosen if Path(chosen).exists() else None)
    if not found:
        raise BadInput(f"engines.{engine.name}.interpreter: '{chosen}' not found")
    return found


def probe_module(interpreter: str, engine: EngineInfo) -> tuple[bool, str]:
    """Can ``interpreter`` import the engine's framework adapter? (message says why not)."""
    env = {**without_internal(os.environ), "PYTHONPATH": os.pathsep.join(map(str, engine.python_path()))}
    code = f"import importlib.util as u; print(u.find_spec({engine.framework_module!r}) is not None and u.find_spec({engine.module!r}) is not None)"
    try:
        proc = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{interpreter}: {exc}"
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["import failed"])[-1]
        return False, tail
    if proc.stdout.strip() != "True":
        return False, f"{engine.framework} is not installed for {interpreter}"
    return True, interpreter


def visible_devices_value(visible: Any) -> str | None:
    """settings['visible_devices'] ('0,2', [0, 2], 'all' or empty) as a CUDA_VISIBLE_DEVICES value (None: leave it)."""
    return ",".join(visible_ids(visible)) or None


def engine_env(engine: EngineInfo, cfg: LocalSettings) -> dict[str, str]:
    """The engine process's environment: compile caches, this process's environment, the run's ``env``
    settings, the GPUs it may use, and FIXED_ENV last (no setting can turn NVLink multicast back on).

    ``visible_devices`` (indices or UUIDs) becomes CUDA_VISIBLE_DEVICES; without it the engine sees
    what this process sees (so ``CUDA_VISIBLE_DEVICES=2,3 bench scenario run ...`` picks GPUs 2 and 3).
    A data-parallel engine uses the first N visible GPUs and passes this environment on to
    every worker process it starts.
    """
    env = {**compile_cache_env(), **without_internal(os.environ), **without_internal(cfg.environment()), **FIXED_ENV}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, engine.python_path()), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    visible = visible_devices_value(cfg.visible_devices)
    if visible:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


class LocalRuntime(Runtime):
    name = "local"

    def check(self, engine: EngineInfo, settings: RuntimeSettings) -> RuntimeFacts:
        cfg = settings.local
        refuse_internal(cfg.environment(), "env")
        interpreter = resolve_interpreter(engine, cfg)
        ok, why = (probe_framework if engine.probe_import else probe_module)(interpreter, engine)
        if not ok:
            raise BadInput(f"engine '{engine.name}': not usable with {interpreter}: {why} "
                           f"(install it, or run 'bench env create {engine.name}')")
        return RuntimeFacts(self.name, interpreter=interpreter)

    def execute(self, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings, timeout_s: float, sink: LineSink) -> Execution:
        interpreter = (settings.checked.interpreter if settings.checked else None) or resolve_interpreter(engine, settings.local)
        env = {**engine_env(engine, settings.local), PARENT_ENV: str(os.getpid())}  # the engine dies with bench (bench_engine.lifeline)
        spec, result = self.spec_paths(paths)
        argv = [interpreter, "-m", engine.module, "--spec", spec, "--result", result]
        execution = run_streamed(argv, env, paths.run_dir, paths.log, timeout_s, sink)
        execution.info = RuntimeFacts(self.name, interpreter=interpreter)
        return execution


RUNTIME = LocalRuntime


def probe_framework(interpreter: str, engine: EngineInfo) -> tuple[bool, str]:
    """Import the framework with ``interpreter``; (True, version) or (False, why)."""
    code = f"import {engine.framework_module} as m; print(getattr(m, '__version__', 'unknown'))"
    env = {**without_internal(os.environ), "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join([*map(str, engine.python_path()), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    try:
        proc = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or ["import failed"])[-1]
    return True, proc.stdout.strip().splitlines()[-1]
