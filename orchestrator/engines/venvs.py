"""Per-engine Python environments for the local runtime, created from images/<engine>/requirements.txt."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

from orchestrator.engines.registry import get_engine
from orchestrator.errors import BadInput


def envs_root() -> Path:
    return Path(os.environ.get("BENCH_ENVS_DIR") or Path.home() / ".cache" / "bench" / "envs")


def env_dir(engine: str) -> Path:
    return envs_root() / engine


def managed_interpreter(engine: str) -> str | None:
    """The interpreter of bench's environment for ``engine``, when one was created."""
    python = env_dir(engine) / "bin" / "python"
    return str(python) if python.exists() else None


def create_env(engine: str, system_site_packages: bool = False) -> Path:
    """Create (or update) the engine's venv and install its pinned requirements; return its python."""
    info = get_engine(engine)
    if info.requirements is None or not info.requirements.is_file():
        raise BadInput(f"images/{engine}: no requirements file to build an environment from")
    target = env_dir(engine)
    venv.EnvBuilder(with_pip=True, system_site_packages=system_site_packages, upgrade_deps=False).create(target)
    python = target / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(info.requirements)], check=False)
    if proc.returncode != 0:
        raise BadInput(f"{info.requirements}: pip install failed (exit {proc.returncode})")
    return python
