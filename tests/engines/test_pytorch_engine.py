"""The PyTorch engine on CPU: results valid against the schema and equal to what the spec asks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "pytorch"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from orchestrator.models import trainable_parameters  # noqa: E402

EXPECTED_10 = trainable_parameters("resnet50_v1.5", 10)


def _ok(run_engine: Any, spec: dict[str, Any]) -> dict[str, Any]:
    code, result, log = run_engine(spec)
    assert result is not None, log
    assert result["status"] == "ok", result.get("failure", log)
    assert code == 0, log
    return result


def _failed(run_engine: Any, spec: dict[str, Any], kind: str) -> dict[str, Any]:
    code, result, log = run_engine(spec)
    assert result is not None, log
    assert result["status"] == "failed" and code == 1, log
    assert result["failure"]["kind"] == kind, result["failure"]
    return result


def test_model_parameter_counts_match_orchestrator() -> None:
    from bench_pytorch.model import build_model
    from bench_pytorch.model import trainable_parameters as count

    for classes in (10, 1000):
        assert count(build_model("resnet50_v1.5", classes)) == trainable_parameters("resnet50_v1.5", classes)
    assert trainable_parameters("resnet50_v1.5", 1000) == 25_557_032


def test_model_layout_is_torchvision_resnet50() -> None:
    import torch
    from bench_pytorch.model import build_model

    torch.manual_seed(0)
    model = build_model("resnet50_v1.5", 10)
    state = model.state_dict()
    assert state["conv1.weight"].shape == (64, 3, 7, 7)
    assert state["layer2.0.conv2.weight"].shape == (128, 128, 3, 3)
    assert model.layer2[0].conv2.stride == (2, 2) and model.layer2[0].conv1.stride == (1, 1)  # v1.5
    assert state["layer4.0.downsample.0.weight"].shape == (2048, 1024, 1, 1)
    assert "layer1.1.downsample.0.weight" not in state
    assert [len(getattr(model, f"layer{i}")) for i in (1, 2, 3, 4)] == [3, 4, 6, 3]
    assert not any(isinstance(m, torch.nn.Conv2d) and m.bias is not None for m in model.modules())
    assert state["fc.weight"].shape == (10, 2048) and state["fc.bias"].shape == (10,)
    assert model.bn1.eps == 1e-5 and model.bn1.momentum == 0.1
    assert torch.equal(model.layer3[2].bn2.weight, torch.ones(256))
    # kaiming normal, fan_out: std = sqrt(2 / (out_channels * k * k))
    std = float(model.layer3[0].conv2.weight.detach().std())
    assert abs(std - (2 / (256 * 9)) ** 0.5) < 0.002
    out = model(torch.zeros(2, 3, 32, 32))
    assert out.shape == (2, 10)


CPU_PATHS = [("fp32", "optimized"), ("bf16", "optimized"), ("fp32", "baseline"), ("bf16", "baseline")]


@pytest.mark.parametrize(("precision", "path"), CPU_PATHS)
def test_train_result_matches_spec(make_spec: Any, run_engine: Any, precision: str, path: str) -> None:
    spec = make_spec("pytorch", precision=precision, path=path, batch=16, steps_per_epoch=2, epochs=1, warmup=1)
    result = _ok(run_engine, spec)
    work, measured = result["work"], result["measurements"]
    assert result["environment"]["device_kind"] == "cpu"
    assert result["environment"]["framework_version"].startswith("2.")
    assert work["trainable_parameters"] == EXPECTED_10 == spec["expected"]["trainable_parameters"]
    assert work["dataset_sha256"] == spec["parity"]["dataset"]["sha256"]
    assert (work["steps"], work["samples"], work["epochs"]) == (2, 32, 1)
    assert (work["batch_per_device"], work["batch_global"], work["world_size"]) == (16, 16, 1)
    expected_dtype = {"fp32": "float32", "bf16": "bfloat16"}[precision]
    assert work["precision"] == {"name": precision, "compute_dtype": expected_dtype, "param_dtype": "float32",
                                 "tf32_matmul": False, "tf32_conv": False, "loss_scaling": False}
    optimizations = work["optimizations"]
    for switch in ("compile", "cuda_graphs", "channels_last"):
        assert optimizations[switch]["applied"] is False
        assert optimizations[switch]["detail"]
    if path == "optimized":
        assert "cpu" in optimizations["cuda_graphs"]["detail"]
    else:
        assert "baseline" in optimizations["compile"]["detail"]
    assert measured["warmup_steps"] == 1
    assert measured["steady"]["steps"] == 1 and measured["steady"]["samples"] == 16
    assert measured["steady"]["throughput"] > 0
    assert measured["peak_memory_bytes"] is None
    assert 1.5 < measured["loss_first"] < 4.0  # about ln(10) at initialisation
    assert measured["final_loss"] == measured["final_loss"] and measured["final_loss"] > 0  # finite, not NaN


def test_partial_batch_counts_every_sample(make_spec: Any, run_engine: Any) -> None:
    # 96 samples, batch 40, drop_last false: steps of 40, 40 and 16 samples, two epochs
    spec = make_spec("pytorch", batch=40, steps_per_epoch=3, epochs=2, warmup=1, drop_last=False,
                     options={"channels_last": True})
    result = _ok(run_engine, spec)
    work, measured = result["work"], result["measurements"]
    assert (work["steps"], work["samples"], work["epochs"]) == (6, 192, 2)
    assert [e["samples"] for e in measured["epochs"]] == [96, 96]
    assert work["drop_last"] is False
    assert work["optimizations"]["channels_last"]["applied"] is True
    assert measured["steady"]["samples"] == 192 - 40


def test_infer_reports_latency(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", mode="infer", batch=8, steps_per_epoch=3, warmup=1)
    result = _ok(run_engine, spec)
    work, measured = result["work"], result["measurements"]
    assert work["mode"] == "infer" and (work["steps"], work["samples"]) == (3, 24)
    latency = measured["latency_ms"]
    assert 0 < latency["min"] <= latency["p50"] <= latency["max"]
    assert measured["final_loss"] is None


def test_host_placement(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", batch=8, steps_per_epoch=2, warmup=0)
    spec["parity"]["data_placement"] = "host"
    result = _ok(run_engine, spec)
    assert result["work"]["data_placement"] == "host"
    assert result["work"]["optimizations"]["data_placement"]["detail"].startswith("host")
    assert result["work"]["samples"] == 16 and result["measurements"]["warmup_steps"] == 0


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_cuda_only_precisions_unsupported_on_cpu(make_spec: Any, run_engine: Any, precision: str) -> None:
    result = _failed(run_engine, make_spec("pytorch", precision=precision, batch=8, steps_per_epoch=1), "unsupported")
    assert precision in result["failure"]["message"]


def test_unknown_arch_unsupported(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", batch=8, steps_per_epoch=1)
    spec["parity"]["model"]["arch"] = "no_such_net"
    result = _failed(run_engine, spec, "unsupported")
    assert "no_such_net" in result["failure"]["message"]


def test_cuda_device_without_gpu_unsupported(make_spec: Any, run_engine: Any) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    spec = make_spec("pytorch", batch=8, steps_per_epoch=1)
    spec["device"] = "cuda"
    _failed(run_engine, spec, "unsupported")


def test_wrong_dataset_hash_is_bad_spec(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", batch=8, steps_per_epoch=1)
    spec["parity"]["dataset"]["sha256"] = "0" * 64
    result = _failed(run_engine, spec, "bad_spec")
    assert "work" not in result
