"""A run's container options as plain data (pure; no daemon needed): mounts, environment,
caches, and the GPU, limit and security parts from their own modules."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from orchestrator.docker_client import ENGINE_LABEL, RUN_LABEL
from orchestrator.envvars import without_internal
from orchestrator.runtimes.docker_gpus import GpuAccess
from orchestrator.runtimes.docker_limits import DEFAULT_SHM_SIZE, ULIMITS, Limits
from orchestrator.runtimes.docker_security import WORKDIR, isolation_host_config
from orchestrator.runtimes.local import FIXED_ENV

DATASET_MOUNT = "/bench/dataset"
RUN_MOUNT = "/bench/run"
CACHE_VOLUME = "bench-compile-cache"
CACHE_MOUNT = "/bench/cache"


def _safe_name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")[:100] or "run"


def cache_env(root: str = CACHE_MOUNT) -> dict[str, str]:
    """Compilation caches (Inductor/Triton, JAX/XLA, TF/XLA) under the cache volume."""
    return {
        "TORCHINDUCTOR_CACHE_DIR": f"{root}/inductor",
        "TRITON_CACHE_DIR": f"{root}/triton",
        "JAX_COMPILATION_CACHE_DIR": f"{root}/jax",
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={root}/tf-xla",
    }


def _environment(gpus: GpuAccess, extra_env: dict[str, str] | None, cache_volume: str | None) -> dict[str, str]:
    caches = cache_env() if cache_volume else cache_env(f"{WORKDIR}/cache")
    env = {**FIXED_ENV, **caches, "HOME": WORKDIR, **without_internal(extra_env or {}), "BENCH_RUNTIME": "docker"}
    if gpus.mode == "none":
        # NVIDIA's images set NVIDIA_VISIBLE_DEVICES=all; with the nvidia runtime as the default
        # runtime that alone would expose every GPU. A CPU run gets none.
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return env


def container_options(*, image: str, engine: str, run_id: str, run_dir: Path, dataset_dir: Path, spec_name: str,
                      result_name: str, user: str, gpus: GpuAccess, extra_env: dict[str, str] | None = None,
                      shm_size: str = DEFAULT_SHM_SIZE, name: str | None = None, limits: Limits | None = None,
                      cache_volume: str | None = CACHE_VOLUME) -> dict[str, Any]:
    """Everything a run's container is created with.

    Returns {'create': kwargs of APIClient.create_container minus host_config,
             'host_config': kwargs of APIClient.create_host_config}.
    """
    limits = limits or Limits()
    host_config = {
        **isolation_host_config(limits.tmp_size),
        "binds": {
            str(Path(dataset_dir).resolve()): {"bind": DATASET_MOUNT, "mode": "ro"},
            str(Path(run_dir).resolve()): {"bind": RUN_MOUNT, "mode": "rw"},
            **({cache_volume: {"bind": CACHE_MOUNT, "mode": "rw"}} if cache_volume else {}),
        },
        "shm_size": shm_size,
        "ulimits": [dict(u) for u in ULIMITS],
        "device_requests": gpus.device_requests(),
        **limits.host_config(),
    }
    create = {
        "image": image,
        "command": ["--spec", f"{RUN_MOUNT}/{spec_name}", "--result", f"{RUN_MOUNT}/{result_name}"],
        "user": user,
        "environment": _environment(gpus, extra_env, cache_volume),
        "working_dir": WORKDIR,
        "labels": {RUN_LABEL: run_id, ENGINE_LABEL: engine},
        "name": name or f"bench-{_safe_name(run_id)}-{uuid.uuid4().hex[:8]}",
        "detach": True,
        "stop_signal": "SIGTERM",
        "use_config_proxy": False,
    }
    return {"create": create, "host_config": host_config}
