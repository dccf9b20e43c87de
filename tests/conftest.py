"""Shared fixtures: a small synthetic dataset, run specs, and running an engine as a subprocess."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def load_schema(name: str) -> dict[str, Any]:
    return json.loads((REPO / "schemas" / f"{name}.schema.json").read_text())


def _merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def spec_doc(**changes: Any) -> dict[str, Any]:
    """The example run spec with ``changes`` merged in, nested blocks key by key:
    ``spec_doc(path="baseline", parity={"batch": {"per_device": 4}})``."""
    return _merged(json.loads((FIXTURES / "example-run-spec.json").read_text()), changes)


def run_spec(**changes: Any) -> Any:
    """:func:`spec_doc` as the engine reads it, a ``bench_engine.contract.RunSpec``."""
    from bench_engine.contract import RunSpec

    return RunSpec.from_json(spec_doc(**changes))


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private dataset cache for the whole test session (BENCH_DATA_DIR)."""
    path = tmp_path_factory.mktemp("datasets")
    os.environ["BENCH_DATA_DIR"] = str(path)
    return path


@pytest.fixture(scope="session")
def smoke_split(data_dir: Path):
    from orchestrator.data import prepare_split

    return prepare_split("cifar10", "synthetic", "train", 96, (32, 32, 3), 10, 0)


@pytest.fixture()
def make_spec(smoke_split) -> Callable[..., dict[str, Any]]:
    """Build a run spec from the example fixture: make_spec("jax", precision="bf16", ...)."""
    from orchestrator.model.layers import trainable_parameters

    base = json.loads((FIXTURES / "example-run-spec.json").read_text())

    def build(engine: str, precision: str = "fp32", path: str = "optimized", mode: str = "train",
              batch: int = 32, steps_per_epoch: int = 3, epochs: int = 1, warmup: int = 1,
              num_classes: int = 10, options: dict[str, Any] | None = None, drop_last: bool = True) -> dict[str, Any]:
        spec = copy.deepcopy(base)
        spec["engine"] = engine
        spec["run_id"] = f"{engine}-{precision}-{path}-{mode}"
        spec["path"] = path
        spec["device"] = "cpu"
        parity = spec["parity"]
        parity.update(mode=mode, precision=precision, epochs=epochs, steps_per_epoch=steps_per_epoch,
                      total_steps=epochs * steps_per_epoch, warmup_steps=warmup)
        parity["model"]["num_classes"] = num_classes
        parity["batch"].update(per_device=batch, drop_last=drop_last)
        parity["batch"]["global"] = batch
        parity["dataset"].update(path=str(smoke_split.path), sha256=smoke_split.sha256, samples=smoke_split.samples)
        spec["engine_options"] = options or {}
        spec["expected"]["trainable_parameters"] = trainable_parameters("resnet50_v1.5", num_classes)
        jsonschema.validate(spec, load_schema("run-spec"))
        return spec

    return build


@pytest.fixture()
def run_engine(tmp_path: Path) -> Callable[[dict[str, Any]], tuple[int, dict[str, Any] | None, str]]:
    """Run ``python -m bench_<engine>`` on a spec; return (exit code, validated result, log)."""

    def run(spec: dict[str, Any], timeout: float = 600) -> tuple[int, dict[str, Any] | None, str]:
        engine = spec["engine"]
        spec_file = tmp_path / f"{spec['run_id']}.spec.json"
        result_file = tmp_path / f"{spec['run_id']}.result.json"
        spec_file.write_text(json.dumps(spec))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "images" / "common"), str(REPO / "images" / engine)])
        proc = subprocess.run(
            [sys.executable, "-m", f"bench_{engine}", "--spec", str(spec_file), "--result", str(result_file)],
            capture_output=True, text=True, env=env, timeout=timeout,
        )
        result = None
        if result_file.exists():
            result = json.loads(result_file.read_text())
            jsonschema.validate(result, load_schema("engine-result"))
        return proc.returncode, result, proc.stderr + proc.stdout

    return run


@pytest.fixture(autouse=True)
def _fresh_engine_discovery():
    """Engine discovery is cached per process: a test that points it at the fake engines
    (BENCH_ENGINE_PATH, undone by monkeypatch) must not leave them to the tests after it."""
    from orchestrator.engines.registry import discover

    discover.cache_clear()
    yield
    discover.cache_clear()


@pytest.fixture(autouse=True)
def _no_stray_terminal_size():
    """A terminal size written into the C environment behind ``os.environ`` (GNU readline sets COLUMNS and
    LINES when a module of the test process initialises it) is inherited by every subprocess, which then
    formats for 80 columns: remove what ``os.environ`` does not hold, so CLI subprocesses see the user's env."""
    for key in ("COLUMNS", "LINES"):
        if key not in os.environ:
            os.unsetenv(key)
    yield
