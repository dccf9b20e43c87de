"""PyTorch: a deliberately wrong setting is read back and makes the run invalid with the field named."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from tests.engines.readback_helpers import add_paths, prepared_mismatches, tiny_dataset, tiny_spec

add_paths("pytorch")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return tiny_dataset(tmp_path_factory.mktemp("tiny"))


def engine() -> Any:
    from bench_pytorch.engine import PyTorchEngine

    return PyTorchEngine()


def test_honest_run_has_no_mismatch(data: tuple[Path, str]) -> None:
    assert prepared_mismatches(engine(), tiny_spec("pytorch", data, "bf16")) == []


def test_momentum_of_the_live_optimizer_is_checked(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import bench_pytorch.workload as workload

    real = workload.make_optimizer
    monkeypatch.setattr(workload, "make_optimizer", lambda params, settings, fused, capturable:
                        real(params, dataclasses.replace(settings, momentum=0.8), fused, capturable))
    assert prepared_mismatches(engine(), tiny_spec("pytorch", data)) == ["optimizer.momentum"]


def test_bf16_run_computing_fp32_is_caught(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from bench_pytorch.precision import Precision

    monkeypatch.setattr(Precision, "autocast", lambda self: contextlib.nullcontext())  # the policy says bf16, nothing casts
    assert prepared_mismatches(engine(), tiny_spec("pytorch", data, "bf16")) == ["observed.compute_dtype"]


def test_host_placed_data_is_caught(data: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_pytorch.workload as workload

    real = workload.BatchSource
    monkeypatch.setattr(workload, "BatchSource", lambda d, placement, device, cl: real(d, "host", device, cl))
    assert prepared_mismatches(engine(), tiny_spec("pytorch", data)) == ["data_placement"]


def test_tampered_shared_weights_are_caught(data: tuple[Path, str], tmp_path: Path) -> None:
    from orchestrator.model.initweights import generate, write_safetensors
    from orchestrator.model.initweights import write_init as write

    path, sha = write(tmp_path, "resnet50_v1.5", 10, 3, 0)
    init = {"mode": "shared", "file": str(path), "sha256": sha, "format": "bench-init-v1"}
    assert prepared_mismatches(engine(), tiny_spec("pytorch", data, init=init)) == []
    tensors = generate("resnet50_v1.5", 10, 3, 0)
    tensors["layer2.0.conv2.weight"][0, 0, 0, 0] += 0.5
    write_safetensors(path, tensors, {"format": "bench-init-v1"})
    assert prepared_mismatches(engine(), tiny_spec("pytorch", data, init=init)) == ["init.sha256"]
