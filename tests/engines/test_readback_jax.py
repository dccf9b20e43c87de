"""JAX: a deliberately wrong setting is read back and makes the run invalid with the field named."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.engines.readback_helpers import add_paths, prepared_mismatches, tiny_dataset, tiny_spec

add_paths("jax")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return tiny_dataset(tmp_path_factory.mktemp("tiny"))


def engine() -> Any:
    from bench_jax.engine import JaxEngine

    return JaxEngine()


def spec(data: tuple[Path, str], precision: str = "fp32") -> dict[str, Any]:
    return tiny_spec("jax", data, precision, path="baseline")  # the baseline compiles nothing in prepare


def test_honest_run_has_no_mismatch(data: tuple[Path, str]) -> None:
    assert prepared_mismatches(engine(), spec(data, "bf16")) == []


def test_momentum_of_the_optimizer_state_is_checked(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_jax.readback as readback

    real = readback.make_tx
    monkeypatch.setattr(readback, "make_tx", lambda settings: real({**settings, "momentum": 0.8}))
    assert prepared_mismatches(engine(), spec(data)) == ["optimizer.momentum"]


def test_bf16_run_computing_fp32_is_caught(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import jax.numpy as jnp

    import bench_jax.model as model

    real = model.build_model
    monkeypatch.setattr(model, "build_model", lambda arch, classes, **kw: real(arch, classes, **{**kw, "dtype": jnp.float32}))
    assert prepared_mismatches(engine(), spec(data, "bf16")) == ["observed.compute_dtype"]


def test_host_placed_data_is_caught(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_jax.engine as jax_engine

    real_prepare = jax_engine.JaxEngine.prepare

    def prepare(self: Any, spec_: Any, dataset: Any) -> Any:  # the split stays on the host whatever the spec says
        host = dataclasses.replace(spec_, parity=dataclasses.replace(spec_.parity, data_placement="host"))
        return real_prepare(self, host, dataset)

    monkeypatch.setattr(jax_engine.JaxEngine, "prepare", prepare)
    assert prepared_mismatches(engine(), spec(data)) == ["data_placement"]
