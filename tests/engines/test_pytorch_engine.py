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

from orchestrator.model.layers import trainable_parameters  # noqa: E402
from tests.engine_outcomes import expect_block_means, expect_failed, expect_ok  # noqa: E402

EXPECTED_10 = trainable_parameters("resnet50_v1.5", 10)


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


CPU_RUNS = [("fp32", "optimized", "device"), ("bf16", "optimized", "device"), ("fp32", "baseline", "device"),
            ("bf16", "baseline", "host")]


@pytest.mark.parametrize(("precision", "path", "placement"), CPU_RUNS)
def test_train_result_matches_spec(make_spec: Any, run_engine: Any, precision: str, path: str, placement: str) -> None:
    spec = make_spec("pytorch", precision=precision, path=path, batch=16, steps_per_epoch=2, epochs=1, warmup=1)
    spec["parity"]["data_placement"] = placement
    result = expect_ok(run_engine, spec)
    work, measured = result["work"], result["measurements"]
    assert result["environment"]["device_kind"] == "cpu"
    assert result["environment"]["framework_version"].startswith("2.")
    assert work["trainable_parameters"] == EXPECTED_10 == spec["expected"]["trainable_parameters"]
    assert work["dataset_sha256"] == spec["parity"]["dataset"]["sha256"]
    assert (work["steps"], work["samples"], work["epochs"]) == (2, 32, 1)
    assert (work["batch_per_device"], work["batch_global"], work["world_size"]) == (16, 16, 1)
    assert work["data_placement"] == placement
    assert work["optimizations"]["data_placement"]["detail"].startswith(placement)
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
    result = expect_ok(run_engine, spec)
    work, measured = result["work"], result["measurements"]
    assert (work["steps"], work["samples"], work["epochs"]) == (6, 192, 2)
    assert [e["samples"] for e in measured["epochs"]] == [96, 96]
    assert work["batch_per_device"] == 40  # the largest batch the loop ran (the 16-sample partial step counted above)
    assert work["optimizations"]["channels_last"]["applied"] is True
    assert measured["steady"]["samples"] == 192 - 40
    expect_block_means(spec, measured)  # the partial batch's step added its loss too


def test_infer_reports_latency(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", mode="infer", batch=8, steps_per_epoch=3, warmup=1)
    result = expect_ok(run_engine, spec)
    work, measured = result["work"], result["measurements"]
    assert work["mode"] == "infer" and (work["steps"], work["samples"]) == (3, 24)
    latency = measured["latency_ms"]
    assert 0 < latency["min"] <= latency["p50"] <= latency["max"]
    assert measured["final_loss"] is None


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_cuda_only_precisions_unsupported_on_cpu(make_spec: Any, run_engine: Any, precision: str) -> None:
    result = expect_failed(run_engine, make_spec("pytorch", precision=precision, batch=8, steps_per_epoch=1), "unsupported")
    assert precision in result["failure"]["message"]


def test_unknown_arch_unsupported(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", batch=8, steps_per_epoch=1)
    spec["parity"]["model"]["arch"] = "no_such_net"
    result = expect_failed(run_engine, spec, "unsupported")
    assert "no_such_net" in result["failure"]["message"]


def test_cuda_device_without_gpu_unsupported(make_spec: Any, run_engine: Any) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    spec = make_spec("pytorch", batch=8, steps_per_epoch=1)
    spec["device"] = "cuda"
    expect_failed(run_engine, spec, "unsupported")


def test_wrong_dataset_hash_is_bad_spec(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", batch=8, steps_per_epoch=1)
    spec["parity"]["dataset"]["sha256"] = "0" * 64
    result = expect_failed(run_engine, spec, "bad_spec")
    assert "work" not in result


def test_plan_resolves_auto_per_device() -> None:
    from bench_pytorch.options import resolve_plan
    from tests.conftest import run_spec

    cpu = resolve_plan(run_spec(path="optimized"), cuda=False)
    assert (cpu.compile, cpu.cuda_graphs, cpu.channels_last, cpu.fused_optimizer) == (False, False, False, False)
    assert cpu.optimizations["cuda_graphs"].applied is False
    assert cpu.optimizations["cuda_graphs"].detail.endswith("cpu: CUDA graphs need CUDA")
    gpu = resolve_plan(run_spec(path="optimized"), cuda=True)
    assert (gpu.compile, gpu.cuda_graphs, gpu.channels_last, gpu.fused_optimizer) == (True, True, True, True)
    assert all(gpu.optimizations[k].applied for k in ("compile", "cuda_graphs", "channels_last"))
    base = resolve_plan(run_spec(path="baseline", engine_options={"compile": True}), cuda=True)
    assert not (base.compile or base.cuda_graphs or base.channels_last)
    own_graphs = resolve_plan(run_spec(path="optimized", engine_options={"compile_mode": "reduce-overhead"}), cuda=True)
    assert own_graphs.compile and not own_graphs.cuda_graphs
    forced = resolve_plan(run_spec(path="optimized", engine_options={"cuda_graphs": True}), cuda=False)
    assert not forced.cuda_graphs and "cpu" in forced.optimizations["cuda_graphs"].detail


def test_train_step_learns_and_handles_odd_batches() -> None:
    """In process: the step updates the weights (loss falls on a fixed batch); a smaller batch runs too."""
    import torch

    from bench_engine.api import StepBatch
    from bench_engine.data import Dataset
    from bench_pytorch.batches import BatchSource
    from bench_pytorch.model import build_model
    from bench_pytorch.optimizer import OptimizerSettings, make_optimizer
    from bench_pytorch.precision import apply_precision
    from bench_pytorch.step import EagerRunner, TrainParts, build_train_step

    torch.manual_seed(0)
    rng = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8, generator=rng).numpy()
    labels = torch.randint(0, 10, (12,), dtype=torch.int32, generator=rng).numpy()
    source = BatchSource(Dataset(images, labels, "x"), "device", torch.device("cpu"), channels_last=False)
    model = build_model("resnet50_v1.5", 10)
    settings = {"name": "sgd", "lr": 0.001, "momentum": 0.9, "weight_decay": 5e-5, "nesterov": False}
    parts = TrainParts(model=model, forward=model, loss_fn=torch.nn.CrossEntropyLoss(),
                       optimizer=make_optimizer(model.parameters(), OptimizerSettings.from_spec(settings), fused=False,
                                                capturable=False),
                       precision=apply_precision("fp32", torch.device("cpu"), training=True))
    step = build_train_step(parts)
    runner = EagerRunner(step, step, source, batch=8)
    losses = [float(runner(StepBatch(epoch=1, index=i, start=0, size=8))) for i in range(4)]
    assert losses[-1] < losses[0] - 0.5, losses  # plain torch: 2.47 -> 1.43 on such a batch
    odd = runner(StepBatch(epoch=1, index=4, start=8, size=4))
    assert odd.shape == () and torch.isfinite(odd)


@pytest.mark.parametrize("chunk_bytes", [64 << 20, 7 * 5 * 3 * 2 + 1])  # one chunk; chunks of 2 images and a short last one
def test_split_normalised_on_the_device_has_the_host_normalisations_bits(monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    import numpy as np
    import torch

    from bench_engine.data import normalize
    from bench_pytorch import batches

    monkeypatch.setattr(batches, "CHUNK_BYTES", chunk_bytes)
    images = np.random.default_rng(5).integers(0, 256, size=(5, 7, 5, 3), dtype=np.uint8)
    images.setflags(write=False)  # a memory-mapped split is read-only
    out = batches.normalized_on(images, torch.device("cpu"))
    assert out.dtype == torch.float32 and tuple(out.shape) == images.shape
    assert np.array_equal(out.numpy().view(np.uint32), normalize(images).view(np.uint32))


def test_inductor_kernel_tuning_is_an_option_for_compiled_cuda_runs() -> None:
    from bench_engine.api import UnsupportedError
    from bench_pytorch.options import resolve_plan
    from tests.conftest import run_spec

    auto = resolve_plan(run_spec(path="optimized"), cuda=True)
    assert not auto.kernel_tuning and auto.optimizations["inductor_kernel_tuning"].detail.startswith("auto: off")
    assert "nothing at 32x32" in auto.optimizations["inductor_kernel_tuning"].detail  # why auto leaves it off (session 22)
    off = resolve_plan(run_spec(path="optimized", engine_options={"inductor_kernel_tuning": False}), cuda=True)
    assert off.optimizations["inductor_kernel_tuning"].detail == "option: off, the kernels' heuristic launch configurations"
    on = resolve_plan(run_spec(path="optimized", engine_options={"inductor_kernel_tuning": True}), cuda=True)
    assert on.kernel_tuning and on.optimizations["inductor_kernel_tuning"].applied
    assert "coordinate_descent_tuning" in on.optimizations["inductor_kernel_tuning"].detail
    cpu = resolve_plan(run_spec(path="optimized", engine_options={"inductor_kernel_tuning": True}), cuda=False)
    assert not cpu.kernel_tuning and cpu.optimizations["inductor_kernel_tuning"].detail.startswith("cpu:")
    mode = resolve_plan(run_spec(path="optimized", engine_options={"compile_mode": "max-autotune-no-cudagraphs"}), cuda=True)
    assert not mode.kernel_tuning  # the mode sets both itself; the report says so, applied
    assert mode.optimizations["inductor_kernel_tuning"].applied and "itself" in mode.optimizations["inductor_kernel_tuning"].detail
    assert not resolve_plan(run_spec(path="baseline", engine_options={"inductor_kernel_tuning": True}), cuda=True).kernel_tuning
    with pytest.raises(UnsupportedError, match="needs compile"):
        resolve_plan(run_spec(path="optimized", engine_options={"inductor_kernel_tuning": True, "compile": False}), cuda=True)


def test_the_plan_reaches_inductors_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel tuning sets both of Inductor's settings, freezing its own, and a plan without them leaves all three off."""
    import torch._inductor.config as inductor_config

    from bench_pytorch.options import OptimizationPlan
    from bench_pytorch.workload import configure_inductor

    keys = ("max_autotune_pointwise", "coordinate_descent_tuning", "freezing")
    for tuning, freezing in ((False, False), (True, False), (False, True)):
        for key in keys:
            monkeypatch.setattr(inductor_config, key, False)
        configure_inductor(OptimizationPlan(cuda=True, compile=True, kernel_tuning=tuning, freezing=freezing))
        assert [getattr(inductor_config, key) for key in keys] == [tuning, tuning, freezing]


def test_freezing_is_on_for_compiled_cuda_inference_only() -> None:
    from bench_engine.api import UnsupportedError
    from bench_pytorch.options import resolve_plan
    from tests.conftest import run_spec

    infer = resolve_plan(run_spec(path="optimized", parity={"mode": "infer"}), cuda=True)
    assert infer.freezing and "BatchNorm folded" in infer.optimizations["freezing"].detail
    assert not resolve_plan(run_spec(path="optimized"), cuda=True).freezing  # training: the weights change
    assert not resolve_plan(run_spec(path="optimized", parity={"mode": "infer"}), cuda=False).freezing  # cpu: no compile
    off = resolve_plan(run_spec(path="optimized", parity={"mode": "infer"}, engine_options={"freezing": False}), cuda=True)
    assert not off.freezing and off.optimizations["freezing"].detail == "option: off"
    assert not resolve_plan(run_spec(path="baseline", parity={"mode": "infer"}), cuda=True).freezing
    with pytest.raises(UnsupportedError, match="inference only"):
        resolve_plan(run_spec(path="optimized", engine_options={"freezing": True}), cuda=True)
    with pytest.raises(UnsupportedError, match="needs compile"):
        resolve_plan(run_spec(path="optimized", parity={"mode": "infer"}, engine_options={"freezing": True, "compile": False}),
                     cuda=True)
