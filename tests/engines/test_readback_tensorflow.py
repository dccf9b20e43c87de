"""TensorFlow: a deliberately wrong setting is read back and makes the run invalid with the field named."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.engines.readback_helpers import add_paths, prepared_mismatches, tiny_dataset, tiny_spec

add_paths("tensorflow")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return tiny_dataset(tmp_path_factory.mktemp("tiny"))


def engine() -> Any:
    from bench_tensorflow.engine import TensorFlowEngine

    return TensorFlowEngine()


def spec(data: tuple[Path, str], precision: str = "fp32") -> dict[str, Any]:
    out = tiny_spec("tensorflow", data, precision, path="baseline")
    out["parity"]["data_placement"] = "host"  # no resident precompile: prepare runs no step
    return out


def test_honest_run_has_no_mismatch(data: tuple[Path, str]) -> None:
    assert prepared_mismatches(engine(), spec(data, "bf16")) == []


def test_momentum_of_the_live_optimizer_is_checked(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_tensorflow.optimizer as tf_optimizer

    real = tf_optimizer.make_sgd
    monkeypatch.setattr(tf_optimizer, "make_sgd", lambda keras, lr, momentum, nesterov, wd: real(keras, lr, 0.8, nesterov, wd))
    assert prepared_mismatches(engine(), spec(data)) == ["optimizer.momentum"]


def test_bf16_run_computing_fp32_is_caught(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_tensorflow.precision as tf_precision

    monkeypatch.setitem(tf_precision.POLICIES, "bf16", "float32")  # the run is labelled bf16, Keras computes fp32
    fields = prepared_mismatches(engine(), spec(data, "bf16"))
    assert "observed.compute_dtype" in fields and set(fields) <= {"observed.compute_dtype", "precision.compute_dtype"}


def test_device_placed_data_against_a_host_spec_is_caught(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_tensorflow.engine as tf_engine

    real_prepare = tf_engine.TensorFlowEngine.prepare

    def prepare(self: Any, spec_: Any, dataset: Any) -> Any:  # resident whatever the spec says
        return real_prepare(self, dataclasses.replace(spec_, parity=dataclasses.replace(spec_.parity, data_placement="device")), dataset)

    monkeypatch.setattr(tf_engine.TensorFlowEngine, "prepare", prepare)
    assert prepared_mismatches(engine(), spec(data)) == ["data_placement"]
