"""The engine result's common parts: its version, the environment and failure records, the result every
run starts from, the engine log line and the atomic writer (used by the entrypoint and the launcher)."""

from __future__ import annotations

import json
import math
import os
import platform
import secrets
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench_engine.api import Engine
from bench_engine.contract import EngineResult, RunSpec
from bench_engine.report import Environment, Failure, as_json

RESULT_SCHEMA_VERSION = 1
ENGINE_LIB_VERSION = "1.0.0"


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def create_beside(path: Path) -> tuple[int, Path]:
    """A new empty file ``.<name>.<random>`` in ``path``'s folder, open for writing: (descriptor, its path).

    Created with mode 0666 like any ordinary new file, so the umask decides (0644 under umask 022);
    ``tempfile.mkstemp`` would make it 0600, and a rename into place keeps that mode.
    """
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temporary name for {path.name}")


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder, fsync, then rename into place: never half a file.
    The file gets the mode of an ordinary new file (0666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_beside(path)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def finite_only(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (strict JSON has no token for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_only(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_only(item) for item in value]
    return value


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as indented, strict JSON atomically: a NaN or infinite float (a diverged loss)
    is written as null, never as the non-JSON token ``NaN``."""
    try:
        text = json.dumps(payload, indent=2, allow_nan=False)
    except ValueError:
        text = json.dumps(finite_only(payload), indent=2, allow_nan=False)
    write_text_atomic(path, text + "\n")


def log(message: str) -> None:
    print(f"[bench-engine] {message}", file=sys.stderr, flush=True)


def base_environment(engine: Engine) -> Environment:
    return Environment(engine.framework, python=platform.python_version(), engine_version=ENGINE_LIB_VERSION)


def base_result(engine: Engine, spec: RunSpec) -> EngineResult:
    """The result before anything ran."""
    return EngineResult(RESULT_SCHEMA_VERSION, spec.run_id, engine.name, "ok", as_json(base_environment(engine)))


def failed(result: EngineResult, failure: Failure) -> EngineResult:
    """``result`` marked failed with ``failure``."""
    return replace(result, status="failed", failure=as_json(failure))
