"""The JAX engine on CPU: the model against torchvision's layout, results valid and equal to the spec.

Engine runs are subprocesses (XLA compiles ResNet-50 for every run, slowly on CPU), so the runs
the selected tests need are started together on first use, two at a time, and shared.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "jax"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from orchestrator.model.layers import trainable_parameters  # noqa: E402
from tests.engine_outcomes import expect_block_means  # noqa: E402

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")
jax.config.update("jax_platforms", "cpu")  # in-process checks only; never hold GPU memory the engine runs need

ARCH = "resnet50_v1.5"
EXPECTED_10 = trainable_parameters(ARCH, 10)
WORKERS = int(os.environ.get("BENCH_TEST_WORKERS", "2"))

# run key -> (make_spec keyword arguments, extra spec edits)
RUNS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # 96 samples, batch 40, drop_last false: steps of 40, 40 and 16 samples, two epochs
    "fp32-optimized-partial": ({"precision": "fp32", "path": "optimized", "batch": 40, "steps_per_epoch": 3, "epochs": 2,
                                "drop_last": False}, {}),
    "bf16-optimized": ({"precision": "bf16", "path": "optimized", "batch": 16, "steps_per_epoch": 2}, {}),
    "fp32-baseline-host": ({"precision": "fp32", "path": "baseline", "batch": 16, "steps_per_epoch": 2},
                           {"data_placement": "host"}),
    "bf16-baseline": ({"precision": "bf16", "path": "baseline", "batch": 8, "steps_per_epoch": 2}, {}),
    "infer": ({"mode": "infer", "batch": 8, "steps_per_epoch": 3}, {}),
    "fp16": ({"precision": "fp16", "batch": 8, "steps_per_epoch": 1}, {}),
    # 3 full steps an epoch, 2 epochs, windows of 2, two steps per jitted call: warmup 1 (single),
    # then windows [2] [2 (one call)] [2 (one call)] ... every dispatched shape compiled in setup
    "fp32-grouped": ({"precision": "fp32", "path": "optimized", "batch": 8, "steps_per_epoch": 3, "epochs": 2,
                      "options": {"steps_per_dispatch": 2}}, {"window_steps": 2}),
    "bad-sha": ({"batch": 8, "steps_per_epoch": 1}, {"sha256": "0" * 64}),
    "unknown-arch": ({"batch": 8, "steps_per_epoch": 1}, {"arch": "no_such_net"}),
    "cuda-without-gpu": ({"batch": 8, "steps_per_epoch": 1}, {"device": "cuda"}),
}

_pool: ThreadPoolExecutor | None = None
_futures: dict[str, Future[tuple[int, dict[str, Any] | None, str]]] = {}


def _spec(make_spec: Callable[..., dict[str, Any]], key: str) -> dict[str, Any]:
    kwargs, edits = RUNS[key]
    spec = make_spec("jax", **kwargs)
    spec["run_id"] = f"jax-{key}"
    if "data_placement" in edits:
        spec["parity"]["data_placement"] = edits["data_placement"]
    if "sha256" in edits:
        spec["parity"]["dataset"]["sha256"] = edits["sha256"]
    if "arch" in edits:
        spec["parity"]["model"]["arch"] = edits["arch"]
    if "device" in edits:
        spec["device"] = edits["device"]
    if "window_steps" in edits:
        spec["measurement"]["window_steps"] = edits["window_steps"]
    return spec


@pytest.fixture(scope="module", autouse=True)
def _shutdown_pool() -> Any:
    yield
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)
        _pool = None
        _futures.clear()


@pytest.fixture()
def run(request: pytest.FixtureRequest, make_spec: Any, run_engine: Any) -> tuple[dict[str, Any], int, dict[str, Any] | None, str]:
    """(spec, exit code, result, log) of the engine run named by the test's ``run`` parameter."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS)
        wanted = [item.callspec.params["run"] for item in request.session.items
                  if item.module is sys.modules[__name__] and hasattr(item, "callspec") and "run" in item.callspec.params]
        key = request.param
        for name in dict.fromkeys([key, *wanted]):  # this test's run first, then in file order
            _futures[name] = _pool.submit(run_engine, _spec(make_spec, name))
    key = request.param
    if key not in _futures:
        _futures[key] = _pool.submit(run_engine, _spec(make_spec, key))
    code, result, log = _futures[key].result()
    return _spec(make_spec, key), code, result, log


def _ok(run: tuple[dict[str, Any], int, dict[str, Any] | None, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec, code, result, log = run
    assert result is not None, log
    assert result["status"] == "ok", result.get("failure", log)
    assert code == 0, log
    return spec, result


def _failed(run: tuple[dict[str, Any], int, dict[str, Any] | None, str], kind: str) -> dict[str, Any]:
    _, code, result, log = run
    assert result is not None, log
    assert result["status"] == "failed" and code == 1, log
    assert result["failure"]["kind"] == kind, result["failure"]
    assert "work" not in result
    return result


# ----------------------------------------------------------------------------- failures (fast runs; the first
# one starts every selected engine run in the background, so the in-process checks below overlap them)


@pytest.mark.parametrize("run", ["fp16"], indirect=True)
def test_fp16_unsupported(run: Any) -> None:
    result = _failed(run, "unsupported")
    assert "fp16" in result["failure"]["message"]


@pytest.mark.parametrize("run", ["unknown-arch"], indirect=True)
def test_unknown_arch_unsupported(run: Any) -> None:
    assert "no_such_net" in _failed(run, "unsupported")["failure"]["message"]


@pytest.mark.parametrize("run", ["cuda-without-gpu"], indirect=True)
def test_cuda_device_without_gpu_unsupported(run: Any) -> None:
    _, _, result, log = run
    assert result is not None, log
    if result["status"] == "ok":
        assert result["environment"]["device_kind"] == "cuda"
        pytest.skip("a GPU is visible")
    assert "GPU" in _failed(run, "unsupported")["failure"]["message"]


@pytest.mark.parametrize("run", ["bad-sha"], indirect=True)
def test_wrong_dataset_hash_is_bad_spec(run: Any) -> None:
    assert "does not match" in _failed(run, "bad_spec")["failure"]["message"]


# ----------------------------------------------------------------------------- the model, in process


def _shapes(num_classes: int, size: int = 32) -> Any:
    import jax.numpy as jnp

    from bench_jax.model import build_model

    model = build_model(ARCH, num_classes)
    return jax.eval_shape(lambda k: model.init(k, jnp.zeros((1, size, size, 3)), train=False), jax.random.PRNGKey(0))


def test_parameter_counts_match_orchestrator() -> None:
    from bench_jax.model import count_parameters

    for classes, expected in ((10, 23_528_522), (1000, 25_557_032)):
        variables = _shapes(classes)
        assert count_parameters(variables["params"]) == trainable_parameters(ARCH, classes) == expected
        assert set(variables) == {"params", "batch_stats"}  # running statistics are not trainable
        assert count_parameters(variables["batch_stats"]) == 53_120


def test_layer_layout_is_torchvision_resnet50() -> None:
    import jax.numpy as jnp

    from bench_jax.model import build_model

    params = _shapes(10)["params"]
    assert params["conv1"]["kernel"].shape == (7, 7, 3, 64) and set(params["conv1"]) == {"kernel"}  # no conv bias
    assert params["fc"]["kernel"].shape == (2048, 10) and params["fc"]["bias"].shape == (10,)
    blocks = [name for name in params if name.startswith("layer")]
    assert [sum(name.startswith(f"layer{i}_") for name in blocks) for i in (1, 2, 3, 4)] == [3, 4, 6, 3]
    assert [name for name in blocks if "downsample_conv" in params[name]] == ["layer1_0", "layer2_0", "layer3_0", "layer4_0"]
    assert params["layer4_0"]["downsample_conv"]["kernel"].shape == (1, 1, 1024, 2048)
    assert params["layer2_0"]["conv2"]["kernel"].shape == (3, 3, 128, 128)

    # spatial sizes at 224x224, with the stride on the 3x3 conv (v1.5)
    model = build_model(ARCH, 10)
    variables = _shapes(10, 224)
    _, state = jax.eval_shape(
        lambda v: model.apply(v, jnp.zeros((2, 224, 224, 3)), train=False, capture_intermediates=True, mutable=["intermediates"]),
        variables,
    )
    inter = state["intermediates"]
    assert inter["conv1"]["__call__"][0].shape == (2, 112, 112, 64)
    assert inter["layer2_0"]["conv1"]["__call__"][0].shape == (2, 56, 56, 128)
    assert inter["layer2_0"]["conv2"]["__call__"][0].shape == (2, 28, 28, 128)
    assert [inter[f"layer{i}_0"]["__call__"][0].shape[1:] for i in (1, 2, 3, 4)] == [
        (56, 56, 256), (28, 28, 512), (14, 14, 1024), (7, 7, 2048)]
    assert inter["__call__"][0].shape == (2, 10)


def test_unknown_arch_raises_unsupported() -> None:
    from bench_engine.api import UnsupportedError
    from bench_jax.model import build_model

    with pytest.raises(UnsupportedError, match="no_such_net"):
        build_model("no_such_net", 10)


SHORT_STAGES = ((2, 64), (2, 128), (2, 256), (2, 512))  # every kind of block, a quarter of the compile time


@pytest.fixture(scope="module")
def initialised() -> tuple[Any, Any]:
    """A ResNet with two bottlenecks per stage (projection and identity blocks) and its initial variables."""
    import jax.numpy as jnp

    from bench_jax.model import ResNet

    model = ResNet(stages=SHORT_STAGES, num_classes=10, precision=jax.lax.Precision.HIGHEST)
    variables = jax.jit(lambda k: model.init(k, jnp.zeros((1, 32, 32, 3)), train=False))(jax.random.PRNGKey(0))
    return model, variables


def test_initialisation_follows_torchvision(initialised: tuple[Any, Any]) -> None:
    _, variables = initialised
    params, stats = variables["params"], variables["batch_stats"]
    conv = np.asarray(params["layer3_0"]["conv2"]["kernel"])  # he-normal (not truncated), fan_out = 3 * 3 * 256
    std = math.sqrt(2 / (9 * 256))
    assert abs(conv.std() / std - 1) < 0.01 and abs(conv.mean()) < 0.01 * std and np.abs(conv).max() > 4 * std
    bound = 1 / math.sqrt(2048)  # nn.Linear: uniform(+-1/sqrt(fan_in)) for kernel and bias
    kernel, bias = np.asarray(params["fc"]["kernel"]), np.asarray(params["fc"]["bias"])
    assert np.abs(kernel).max() <= bound and abs(kernel.std() / (bound / math.sqrt(3)) - 1) < 0.03
    assert np.abs(bias).max() <= bound and bias.std() > 0
    assert np.all(np.asarray(params["layer1_0"]["bn3"]["scale"]) == 1) and np.all(np.asarray(params["bn1"]["bias"]) == 0)
    assert np.all(np.asarray(stats["bn1"]["mean"]) == 0) and np.all(np.asarray(stats["bn1"]["var"]) == 1)


def _torch_state(params: Any, stats: Any) -> dict[str, Any]:
    """Flax variables under torchvision's state-dict names (OIHW conv weights, (out, in) linear)."""
    import torch

    out: dict[str, Any] = {}

    def conv(prefix: str, kernel: Any) -> None:
        out[f"{prefix}.weight"] = torch.from_numpy(np.transpose(np.asarray(kernel), (3, 2, 0, 1)).copy())

    def bn(prefix: str, p: Any, s: Any) -> None:
        for name, value in (("weight", p["scale"]), ("bias", p["bias"]), ("running_mean", s["mean"]), ("running_var", s["var"])):
            out[f"{prefix}.{name}"] = torch.from_numpy(np.asarray(value).copy())
        out[f"{prefix}.num_batches_tracked"] = torch.tensor(0)

    conv("conv1", params["conv1"]["kernel"])
    bn("bn1", params["bn1"], stats["bn1"])
    for name, block in params.items():
        if not name.startswith("layer"):
            continue
        prefix = name.replace("_", ".")
        for i in (1, 2, 3):
            conv(f"{prefix}.conv{i}", block[f"conv{i}"]["kernel"])
            bn(f"{prefix}.bn{i}", block[f"bn{i}"], stats[name][f"bn{i}"])
        if "downsample_conv" in block:
            conv(f"{prefix}.downsample.0", block["downsample_conv"]["kernel"])
            bn(f"{prefix}.downsample.1", block["downsample_bn"], stats[name]["downsample_bn"])
    out["fc.weight"] = torch.from_numpy(np.asarray(params["fc"]["kernel"]).T.copy())
    out["fc.bias"] = torch.from_numpy(np.asarray(params["fc"]["bias"]).copy())
    return out


def test_same_function_and_gradients_as_the_pytorch_engine(initialised: tuple[Any, Any]) -> None:
    """The same weights in the PyTorch engine's model give the same outputs, loss and gradients.

    Computed in float64 on both sides: train-mode batch norm over a tiny batch is ill-conditioned,
    so float32 round-off would hide (or fake) a structural difference.
    """
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(REPO / "images" / "pytorch"))
    try:
        from bench_pytorch.model import ResNet as TorchResNet
    except ImportError as exc:
        pytest.skip(f"PyTorch engine not importable: {exc}")
    finally:
        sys.path.remove(str(REPO / "images" / "pytorch"))
    import jax.numpy as jnp
    import optax

    from bench_jax.model import ResNet

    _, variables = initialised
    rng = np.random.default_rng(0)
    params = variables["params"]
    # non-trivial running statistics so that the eval-mode comparison covers them
    stats = jax.tree_util.tree_map(lambda a: rng.uniform(0.5, 1.5, a.shape).astype(np.float32), variables["batch_stats"])
    reference = TorchResNet(tuple((blocks, width, 4 * width) for blocks, width in SHORT_STAGES), 10)
    reference.load_state_dict(_torch_state(params, stats), strict=True)  # every tensor has its counterpart
    reference.double()
    x = rng.uniform(-1, 1, (2, 64, 64, 3))
    y = np.array([3, 7], np.int32)
    xt = torch.from_numpy(np.transpose(x, (0, 3, 1, 2)).copy())
    reference.eval()
    with torch.no_grad():
        expected_eval = reference(xt).numpy()
    reference.train()
    loss_t = torch.nn.functional.cross_entropy(reference(xt), torch.from_numpy(y).long())
    loss_t.backward()
    torch_grads = {name: p.grad.numpy() for name, p in reference.named_parameters()}

    jax.config.update("jax_enable_x64", True)
    try:
        model = ResNet(stages=SHORT_STAGES, num_classes=10, dtype=jnp.float64, param_dtype=jnp.float64,
                       precision=jax.lax.Precision.HIGHEST)
        p64, s64 = jax.tree_util.tree_map(lambda a: jnp.asarray(np.asarray(a, np.float64)), (params, stats))
        got_eval = np.asarray(jax.jit(lambda p, s, xs: model.apply({"params": p, "batch_stats": s}, xs, train=False))(p64, s64, x))

        def loss_fn(p: Any, xs: Any, ys: Any) -> Any:
            logits, _ = model.apply({"params": p, "batch_stats": s64}, xs, train=True, mutable=["batch_stats"])
            return optax.softmax_cross_entropy_with_integer_labels(logits, ys).mean()

        loss_j, grads = jax.jit(jax.value_and_grad(loss_fn))(p64, x, y)
        grads = jax.tree_util.tree_map(np.asarray, grads)
    finally:
        jax.config.update("jax_enable_x64", False)

    np.testing.assert_allclose(got_eval, expected_eval, rtol=1e-9, atol=1e-9)
    assert abs(float(loss_j) - loss_t.item()) < 1e-9
    ours = _torch_state(grads, jax.tree_util.tree_map(np.zeros_like, stats))
    assert {name for name in ours if name.endswith(("weight", "bias"))} == set(torch_grads)
    for name, want in torch_grads.items():
        scale = float(np.abs(want).max()) or 1.0
        np.testing.assert_allclose(ours[name].numpy(), want, rtol=1e-6, atol=1e-8 * scale, err_msg=name)


def test_precision_policy() -> None:
    from bench_engine.api import UnsupportedError
    from bench_jax.precision import precision_policy

    class _Gpu:
        compute_capability = "9.0"

    class _OldGpu:
        compute_capability = "7.0"

    from bench_engine.report import as_json

    assert as_json(precision_policy("fp32", "cuda", [_Gpu()]).report()) == {
        "name": "fp32", "compute_dtype": "float32", "param_dtype": "float32",
        "tf32_matmul": False, "tf32_conv": False, "loss_scaling": False}
    assert precision_policy("fp32", "cuda", [_Gpu()]).highest
    tf32 = precision_policy("tf32", "cuda", [_Gpu()])
    assert tf32.tf32 and not tf32.highest and tf32.compute_dtype == "float32"
    for kind, devices in (("cuda", [_OldGpu()]), ("cpu", [])):  # no TF32 tensor cores before Ampere, none on CPU
        with pytest.raises(UnsupportedError, match="tf32"):
            precision_policy("tf32", kind, devices)
    assert precision_policy("bf16", "cpu", []).report().compute_dtype == "bfloat16"
    with pytest.raises(UnsupportedError, match="fp16"):
        precision_policy("fp16", "cuda", [_Gpu()])


def test_out_of_memory_and_version_helpers() -> None:
    from bench_engine.hardware import cuda_version_text, cudnn_version_text
    from bench_jax.engine import JaxEngine

    engine = JaxEngine()
    assert engine.is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2GiB"))
    try:
        try:
            raise MemoryError("RESOURCE_EXHAUSTED: failed to allocate")
        except MemoryError as inner:
            raise RuntimeError("step failed") from inner
    except RuntimeError as wrapped:
        assert engine.is_out_of_memory(wrapped)
    assert not engine.is_out_of_memory(ValueError("shapes do not match"))
    assert (cuda_version_text(12080), cudnn_version_text(90800), cudnn_version_text(8907)) == ("12.8", "9.8.0", "8.9.7")
    assert cuda_version_text(None) is None and cudnn_version_text(0) is None


# ----------------------------------------------------------------------------- engine runs (subprocesses)


def _check_common(spec: dict[str, Any], result: dict[str, Any]) -> None:
    work, env = result["work"], result["environment"]
    assert env["device_kind"] == "cpu" and env["devices"] and env["framework"] == "JAX"
    assert env["framework_version"].split(".")[0] == "0" and set(env["extra"]) >= {"flax", "optax"}
    assert (env["cuda"], env["cudnn"], env["driver"]) == (None, None, None)
    assert work["trainable_parameters"] == EXPECTED_10 == spec["expected"]["trainable_parameters"]
    assert work["dataset_sha256"] == spec["parity"]["dataset"]["sha256"]
    assert work["dataset_samples"] == 96 and work["input_shape"] == [32, 32, 3]
    batch = spec["parity"]["batch"]["per_device"]
    assert (work["batch_per_device"], work["batch_global"], work["world_size"]) == (batch, batch, 1)
    assert work["data_placement"] == spec["parity"]["data_placement"]
    assert result["measurements"]["peak_memory_bytes"] is None  # no allocator statistics on CPU
    for switch in work["optimizations"].values():
        assert isinstance(switch["applied"], bool) and switch["detail"]
    assert work["optimizations"]["command_buffers"]["applied"] is False  # a GPU feature: never claimed on a CPU


TRAIN_RUNS = [("fp32-optimized-partial", "fp32", "optimized"), ("bf16-optimized", "bf16", "optimized"),
              ("fp32-baseline-host", "fp32", "baseline"), ("bf16-baseline", "bf16", "baseline")]


@pytest.mark.parametrize(("run", "precision", "path"), TRAIN_RUNS, indirect=["run"])
def test_train_result_matches_spec(run: Any, precision: str, path: str) -> None:
    from tests.parity_docs import check_against_spec

    spec, result = _ok(run)
    _check_common(spec, result)
    work, measured = result["work"], result["measurements"]
    assert check_against_spec(spec, result, "cpu") == []
    expected_dtype = {"fp32": "float32", "bf16": "bfloat16"}[precision]
    assert work["precision"] == {"name": precision, "compute_dtype": expected_dtype, "param_dtype": "float32",
                                 "tf32_matmul": False, "tf32_conv": False, "loss_scaling": False}
    optimized = path == "optimized"
    switches = work["optimizations"]
    assert switches["jit"]["applied"] is True
    assert switches["jit_full_step"]["applied"] is optimized
    assert switches["donation"]["applied"] is optimized
    assert switches["device_resident_data"]["applied"] is (work["data_placement"] == "device")
    assert ("whole train step" if optimized else "outside") in switches["jit"]["detail"]
    assert measured["warmup_steps"] == 1 and measured["warmup_s"] > 0
    steady = measured["steady"]
    assert steady["steps"] == work["steps"] - 1 and steady["throughput"] > 0
    assert 1.5 < measured["loss_first"] < 4.0  # about ln(10) at initialisation
    assert math.isfinite(measured["final_loss"]) and measured["final_loss"] > 0


@pytest.mark.parametrize("run", ["fp32-optimized-partial"], indirect=True)
def test_partial_batch_counts_every_sample(run: Any) -> None:
    _, result = _ok(run)
    work, measured = result["work"], result["measurements"]
    assert (work["steps"], work["samples"], work["epochs"]) == (6, 192, 2)
    assert work["samples"] % work["batch_per_device"] != 0  # the partial batches were run, not dropped
    assert [(e["steps"], e["samples"]) for e in measured["epochs"]] == [(3, 96), (3, 96)]
    assert [w[1] for w in measured["windows"]] == [40, 16, 40, 40, 16]  # the partial batch with its real size
    assert measured["steady"]["samples"] == 192 - 40


@pytest.mark.parametrize("run", ["bf16-optimized"], indirect=True)
def test_steps_and_samples_as_asked(run: Any) -> None:
    _, result = _ok(run)
    work, measured = result["work"], result["measurements"]
    assert (work["steps"], work["samples"], work["epochs"]) == (2, 32, 1)
    assert measured["epochs"] == [{"epoch": 1, "steps": 2, "samples": 32, "time_s": measured["epochs"][0]["time_s"]}]
    assert measured["steady"]["samples"] == 16
    # the default steps_per_dispatch (auto) on a CPU: one step per call, and the result says why
    switch = work["optimizations"]["steps_per_dispatch"]
    assert work["steps_per_dispatch"] == 1 and switch["applied"] is False and switch["detail"].startswith("auto: 1 (cpu:")


@pytest.mark.parametrize("run", ["fp32-baseline-host"], indirect=True)
def test_host_placement(run: Any) -> None:
    _, result = _ok(run)
    switch = result["work"]["optimizations"]["device_resident_data"]
    assert result["work"]["data_placement"] == "host" and switch["applied"] is False and "host" in switch["detail"]


@pytest.mark.parametrize("run", ["infer"], indirect=True)
def test_infer_reports_latency(run: Any) -> None:
    from tests.parity_docs import check_against_spec

    spec, result = _ok(run)
    _check_common(spec, result)
    work, measured = result["work"], result["measurements"]
    assert check_against_spec(spec, result, "cpu") == []
    assert work["mode"] == "infer" and (work["steps"], work["samples"]) == (3, 24)
    assert work["optimizations"]["jit_full_step"]["applied"] is False and work["optimizations"]["donation"]["applied"] is False
    latency = measured["latency_ms"]
    assert 0 < latency["min"] <= latency["p50"] <= latency["p99"] <= latency["max"]
    assert measured["final_loss"] is None and measured["loss_first"] is None


@pytest.mark.parametrize("run", ["fp32-grouped"], indirect=True)
def test_several_steps_per_dispatch_run(run: Any) -> None:
    from tests.parity_docs import check_against_spec

    spec, result = _ok(run)
    work, measured = result["work"], result["measurements"]
    assert check_against_spec(spec, result, "cpu") == []
    switch = work["optimizations"]["steps_per_dispatch"]
    assert switch["applied"] is True and switch["detail"].startswith("2 full SGD steps")
    assert (work["steps"], work["samples"]) == (6, 48)
    assert [w[:2] for w in measured["windows"]] == [[2, 16], [2, 16], [1, 8]]  # epoch 1 after warmup: 2; epoch 2: 2 + 1
    assert math.isfinite(measured["final_loss"])
    expect_block_means(spec, measured)  # a lax.scan call's loss vector counts each of its steps


def test_steps_per_dispatch_auto_fits_on_a_gpu_only() -> None:
    """auto (the default) fits K to the timed blocks when the kind is a GPU (told, not needed), stays 1 on a CPU,
    on several devices, the baseline, host data and inference; an integer wins."""
    from bench_engine.schedule import Schedule
    from bench_jax.options import JaxOptions, optimizations, steps_per_dispatch
    from bench_jax.step import StepConfig

    # 50 steps an epoch of 8, 2 epochs, warmup 10, windows of 20: timed blocks 20 20 | 20 20 10
    plan = Schedule(per_device=8, steps_per_epoch=50, epochs=2, warmup_steps=10, window_steps=20)
    train = StepConfig(mode="train", full_step=True, donate=True, device_data=True, size=8)

    def choose(kind: str = "cuda", options: dict[str, Any] | None = None, **changes: Any) -> Any:
        config = StepConfig(**{**train.__dict__, **changes})
        return steps_per_dispatch(JaxOptions.of(options or {}), config, kind, plan, 400)

    fitted = choose()
    assert (fitted.steps, fitted.reason) == (10, "auto: K=10 fitted to the timing blocks (9 calls for 90 timed steps)")
    on_cpu = choose("cpu")
    assert on_cpu.steps == 1 and on_cpu.reason.startswith("auto: 1 (cpu: XLA's CPU while loop")
    for changes, why in (({"world": 2}, "several devices"), ({"full_step": False}, "optimized path"),
                         ({"device_data": False}, "device-resident"), ({"mode": "infer"}, "inference")):
        assert choose(**changes).steps == 1 and why in choose(**changes).reason
    explicit = {"steps_per_dispatch": 4}
    assert (choose("cpu", explicit).steps, choose(options=explicit, world=2).steps, choose(options=explicit, mode="infer").steps) == (4, 4, 1)
    switch = optimizations(train, "", "cuda", None, fitted)["steps_per_dispatch"]
    assert switch.applied and switch.detail.startswith("10 full SGD steps per jitted call (auto: K=10 fitted")
    assert optimizations(train, "", "cpu", None, on_cpu)["steps_per_dispatch"] == (False, on_cpu.reason)


def test_planned_calls_follow_the_harness_schedule(make_spec: Any) -> None:
    from bench_engine.contract import RunSpec
    from bench_jax.workload import planned_calls

    spec = make_spec("jax", batch=8, steps_per_epoch=5, epochs=2, warmup=3, drop_last=False)
    spec["measurement"]["window_steps"] = 4
    # epoch 1: warmup [8 8 8] -> 3 singles (queue of 3 < 4 flushed at the sync); window [8 partial]
    # epoch 2: window [8 8 8 8] -> one call of 4; window [partial]
    samples = 8 * 4 + 5
    plan = RunSpec.from_json(spec).schedule
    assert planned_calls(plan, samples, 1, 4) == {(8, 1), (5, 1), (8, 4)}
    assert planned_calls(plan, samples, 1, 1) == {(8, 1), (5, 1)}


def test_several_steps_per_call_equal_single_steps_in_float64() -> None:
    """K steps in one jitted call (lax.scan) are K single steps in order, to float64 rounding;
    the same steps in another order are not (so the comparison can fail)."""
    import optax

    from bench_jax.model import build_model
    from bench_jax.step import StepConfig, TrainState, build_step

    jnp = jax.numpy
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        model = build_model(ARCH, 10, dtype=jnp.float64, param_dtype=jnp.float64, precision=None)
        variables = jax.jit(lambda k: model.init(k, jnp.zeros((1, 16, 16, 3), jnp.float64), train=False))(jax.random.PRNGKey(0))
        tx = optax.chain(optax.add_decayed_weights(5e-5), optax.sgd(0.01, momentum=0.9))

        def fresh() -> Any:
            return TrainState(variables["params"], variables["batch_stats"], tx.init(variables["params"]))

        rng = np.random.default_rng(0)
        batch = 4
        data = (jnp.asarray(rng.standard_normal((3 * batch, 16, 16, 3))), jnp.asarray(rng.integers(0, 10, 3 * batch).astype(np.int32)))
        single = build_step(model, tx, StepConfig("train", True, False, True, batch))
        several = build_step(model, tx, StepConfig("train", True, False, True, batch, steps=3))
        state = fresh()
        for start in (0, batch, 2 * batch):
            state, loss = single(state, data, jnp.int32(start))
        grouped, grouped_loss = several(fresh(), data, jnp.asarray([0, batch, 2 * batch], jnp.int32))
        swapped, _ = several(fresh(), data, jnp.asarray([batch, 0, 2 * batch], jnp.int32))

        def rel(a: Any, b: Any) -> float:
            return max(float(jnp.max(jnp.abs(x - y)) / (jnp.max(jnp.abs(x)) + 1e-30))
                       for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))

        assert float(grouped_loss[-1]) == pytest.approx(float(loss), rel=1e-6)  # the call returns every step's loss
        assert rel(state.params, grouped.params) < 1e-6
        assert rel(state.params, swapped.params) > 1e-3
    finally:
        jax.config.update("jax_enable_x64", previous)


def test_cudnn_is_initialised_before_command_buffers_on_a_gpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """With command buffers on a GPU, cuDNN gets one convolution outside any capture first (a cached executable
    crashed without it on the H200); not on a CPU, not without command buffers. The warm-up itself runs on a CPU."""
    from bench_jax import dnn, prepare
    from bench_jax.options import JaxOptions
    from tests.conftest import run_spec

    called: list[list[Any]] = []
    monkeypatch.setattr(prepare.dnn, "initialise_dnn", lambda devices: called.append(devices))
    spec = run_spec(path="optimized", device="auto")
    assert prepare.ready_for_command_buffers(JaxOptions.of({}), spec, "cuda", ["gpu0"]).startswith("--xla_gpu_enable_command_buffer=")
    assert called == [["gpu0"]]
    assert prepare.ready_for_command_buffers(JaxOptions.of({}), spec, "cpu", ["cpu0"]) and called == [["gpu0"]]
    off = JaxOptions.of({"command_buffers": False})
    assert prepare.ready_for_command_buffers(off, spec, "cuda", ["gpu0"]) == "" and called == [["gpu0"]]
    monkeypatch.undo()
    dnn.initialise_dnn(jax.devices("cpu")[:1])


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_sync_waits_for_the_logits_alone_in_inference(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    import jax

    from bench_jax.workload import JaxWorkload

    waited: list[object] = []
    monkeypatch.setattr(jax, "block_until_ready", waited.append)
    workload = JaxWorkload(trainable_parameters=0, precision=None, data_placement="device", mode=mode, state={"params": "every leaf"})  # type: ignore[arg-type]
    workload._last = "output"
    workload.sync()
    assert waited == (["output"] if mode == "infer" else [({"params": "every leaf"}, "output")])


@pytest.mark.parametrize("chunk_bytes", [64 << 20, 2 * 7 * 5 * 3 + 1])  # one chunk; several, the last one short
def test_split_normalised_on_the_device_has_the_hosts_bits(monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    from bench_engine.data import normalize
    from bench_jax import placement

    monkeypatch.setattr(placement, "CHUNK_BYTES", chunk_bytes)
    images = np.random.default_rng(5).integers(0, 256, size=(5, 7, 5, 3), dtype=np.uint8)
    images.setflags(write=False)  # a memory-mapped split is read-only
    out = placement.normalized_on(images, jax.devices()[0])
    assert out.dtype == np.float32 and tuple(out.shape) == images.shape
    assert np.array_equal(np.asarray(out).view(np.uint32), normalize(images).view(np.uint32))


def test_packed_variables_give_the_unpacked_calls_outputs_exactly() -> None:
    """bench_jax.packing: one buffer per dtype, the tree rebuilt inside the jit; the logits are bit for bit the same."""
    import flax.linen as nn
    import jax.numpy as jnp

    from bench_jax.packing import pack

    class Small(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = nn.Conv(4, (3, 3))(x)
            x = nn.BatchNorm(use_running_average=True)(x)
            return nn.Dense(3)(x.mean(axis=(1, 2)))

    model = Small()
    x = jnp.asarray(np.random.default_rng(1).normal(size=(2, 6, 6, 3)), jnp.float32)
    variables = model.init(jax.random.PRNGKey(0), x)
    variables = jax.tree.map(lambda v: v.astype(jnp.bfloat16) if v.ndim == 1 else v, variables)  # two dtypes
    packed = pack(variables, jax.devices()[0])
    assert len(packed.buffers) == 2 and packed.leaves == len(jax.tree.leaves(variables))
    direct = jax.jit(lambda v, images: model.apply(v, images))(variables, x)
    unpacked = jax.jit(lambda bufs, images: model.apply(packed.unpack(bufs), images))(packed.buffers, x)
    assert np.array_equal(np.asarray(direct).view(np.uint32), np.asarray(unpacked).view(np.uint32))
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(np.array_equal(np.asarray(a), np.asarray(b))),
                                     variables, packed.unpack(packed.buffers)))


def test_pack_variables_applies_to_optimized_one_device_inference_only() -> None:
    from bench_jax.options import JaxOptions, pack_variables
    from bench_jax.step import StepConfig

    def config(mode: str, world: int = 1) -> StepConfig:
        return StepConfig(mode=mode, full_step=True, donate=False, device_data=True, size=1, world=world)

    assert pack_variables(JaxOptions(), config("infer"), optimized=True).applied
    assert not pack_variables(JaxOptions(), config("infer"), optimized=False).applied  # baseline
    assert pack_variables(JaxOptions(pack_variables=True), config("infer"), optimized=False).applied
    assert not pack_variables(JaxOptions(pack_variables=False), config("infer"), optimized=True).applied
    assert not pack_variables(JaxOptions(pack_variables=True), config("train"), optimized=True).applied
    assert not pack_variables(JaxOptions(pack_variables=True), config("infer", world=2), optimized=True).applied
