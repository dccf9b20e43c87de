"""The TensorFlow engine on CPU: the model is torchvision's ResNet-50, the step does PyTorch's SGD,
and results are schema-valid and equal to what the spec asks.

XLA compiles slowly on CPU, so the engine runs use tiny batches and few steps; the step logic
(XLA slicing of resident data, loss scaling with coupled L2) is also checked in-process on tiny
models.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "tensorflow"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from orchestrator.model.layers import trainable_parameters  # noqa: E402
from tests.engine_outcomes import expect_block_means, expect_failed, expect_ok  # noqa: E402

ARCH = "resnet50_v1.5"
EXPECTED_10 = trainable_parameters(ARCH, 10)


def _tf() -> tuple[Any, Any]:
    import keras
    import tensorflow as tf

    return tf, keras


# ----------------------------------------------------------------------------- the model


def test_model_parameter_counts_match_orchestrator() -> None:
    from bench_tensorflow.model import build_model, count_trainable

    for classes in (10, 1000):
        assert count_trainable(build_model(ARCH, classes, (32, 32, 3))) == trainable_parameters(ARCH, classes)
    assert EXPECTED_10 == 23_528_522 and trainable_parameters(ARCH, 1000) == 25_557_032


def test_model_layout_is_resnet50_v15() -> None:
    _, keras = _tf()
    from bench_tensorflow.model import build_model

    keras.utils.set_random_seed(0)
    model = build_model(ARCH, 10, (64, 64, 3))
    layer = model.get_layer
    convs = [lay for lay in model.layers if isinstance(lay, keras.layers.Conv2D)]
    assert len(convs) == 53 and not any(c.use_bias for c in convs)
    assert layer("stem_conv").kernel.shape == (7, 7, 3, 64) and layer("stem_conv").padding == "valid"
    assert layer("stem_pad").padding == ((3, 3), (3, 3)) and layer("pool_pad").padding == ((1, 1), (1, 1))
    # v1.5: the stride sits on the 3x3 conv, with explicit padding 1
    assert layer("layer2_0_conv2").strides == (2, 2) and layer("layer2_0_conv1").strides == (1, 1)
    assert layer("layer2_0_conv2_pad").padding == ((1, 1), (1, 1)) and layer("layer2_0_conv2").padding == "valid"
    assert layer("layer4_0_down_conv").kernel.shape == (1, 1, 1024, 2048) and layer("layer4_0_down_conv").strides == (2, 2)
    assert layer("layer1_0_down_conv").strides == (1, 1)  # 64 -> 256 channels: projected, not strided
    with pytest.raises(ValueError):
        layer("layer1_1_down_conv")
    assert [sum(1 for c in convs if c.name.startswith(f"layer{i}_") and c.name.endswith("_conv1")) for i in (1, 2, 3, 4)] == [3, 4, 6, 3]
    bn = layer("layer3_2_bn2")
    assert bn.epsilon == 1e-5 and bn.momentum == 0.9
    assert np.array_equal(bn.gamma.numpy(), np.ones(256)) and np.array_equal(bn.beta.numpy(), np.zeros(256))
    std = float(np.std(layer("layer3_0_conv2").kernel.numpy()))  # kaiming normal, fan_out
    assert abs(std - (2 / (256 * 9)) ** 0.5) < 0.002
    fc = layer("fc").kernel.numpy()
    assert fc.shape == (2048, 10) and np.abs(fc).max() <= 1 / 2048**0.5 and layer("fc").use_bias
    shapes = {name: tuple(layer(name).output.shape[1:]) for name in ("stem_conv", "stem_pool", "layer2_0_out", "layer4_2_out")}
    assert shapes == {"stem_conv": (32, 32, 64), "stem_pool": (16, 16, 64), "layer2_0_out": (8, 8, 512), "layer4_2_out": (2, 2, 2048)}
    assert model(np.zeros((2, 64, 64, 3), np.float32)).shape == (2, 10)


def test_unknown_arch_is_unsupported() -> None:
    from bench_engine.api import UnsupportedError
    from bench_tensorflow.model import build_model

    with pytest.raises(UnsupportedError, match="no_such_net"):
        build_model("no_such_net", 10, (32, 32, 3))


# ------------------------------------------------- same numbers as PyTorch (float64, no noise)


def _torch_resnet50(torch: Any, num_classes: int) -> Any:
    """torchvision's resnet50 layout, written out (torchvision itself is not required)."""
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4)
            self.down = None
            if stride != 1 or cin != width * 4:
                self.down = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4))

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet50(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
            self.pool = nn.MaxPool2d(3, 2, 1)
            blocks, cin = [], 64
            for stage, (count, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512)), start=1):
                for index in range(count):
                    blocks.append(Bottleneck(cin, width, 2 if stage > 1 and index == 0 else 1))
                    cin = width * 4
            self.blocks = nn.ModuleList(blocks)
            self.fc = nn.Linear(2048, num_classes)

        def forward(self, x: Any) -> Any:
            x = self.pool(torch.relu(self.bn1(self.conv1(x))))
            for block in self.blocks:
                x = block(x)
            return self.fc(x.mean((2, 3)))

    return ResNet50()


def _copy_keras_to_torch(torch: Any, model: Any, net: Any) -> None:
    layer = model.get_layer

    def put(param: Any, value: np.ndarray) -> None:
        param.data = torch.from_numpy(np.ascontiguousarray(value)).to(param.dtype)

    def conv(module: Any, name: str) -> None:
        put(module.weight, layer(name).kernel.numpy().transpose(3, 2, 0, 1))

    def bn(module: Any, name: str) -> None:
        src = layer(name)
        put(module.weight, src.gamma.numpy())
        put(module.bias, src.beta.numpy())

    conv(net.conv1, "stem_conv")
    bn(net.bn1, "stem_bn")
    blocks = iter(net.blocks)
    for stage, count in enumerate((3, 4, 6, 3), start=1):
        for index in range(count):
            block, prefix = next(blocks), f"layer{stage}_{index}"
            for k in (1, 2, 3):
                conv(getattr(block, f"conv{k}"), f"{prefix}_conv{k}")
                bn(getattr(block, f"bn{k}"), f"{prefix}_bn{k}")
            if block.down is not None:
                conv(block.down[0], f"{prefix}_down_conv")
                bn(block.down[1], f"{prefix}_down_bn")
    put(net.fc.weight, layer("fc").kernel.numpy().T)
    put(net.fc.bias, layer("fc").bias.numpy())


def test_training_steps_equal_pytorch_sgd_in_float64() -> None:
    """Forward, backward, coupled L2, momentum and BN running mean: PyTorch's numbers in float64."""
    torch = pytest.importorskip("torch")
    tf, keras = _tf()
    from bench_tensorflow.model import build_model
    from bench_tensorflow.optimizer import make_sgd
    from bench_tensorflow.step import build_step

    lr, momentum, wd = 0.1, 0.9, 5e-3
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 32, 32, 3))
    y = rng.integers(0, 10, 4).astype(np.int32)
    previous, floatx = keras.mixed_precision.global_policy(), keras.config.floatx()
    keras.config.set_floatx("float64")  # the Input layer too
    keras.mixed_precision.set_global_policy("float64")
    try:
        keras.utils.set_random_seed(0)
        model = build_model(ARCH, 10, (32, 32, 3))
        net = _torch_resnet50(torch, 10).double()
        _copy_keras_to_torch(torch, model, net)
        optimizer = make_sgd(keras, lr, momentum, False, wd)
        optimizer.build(model.trainable_variables)
        step = build_step(tf, model, optimizer, train=True, compile_function=True, jit_compile=False, resident=None)
        reference = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, weight_decay=wd)
        xt, yt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), torch.from_numpy(y.astype(np.int64))
        losses = []
        for _ in range(2):  # the second update uses the momentum buffer
            ours = float(step(x, y))
            reference.zero_grad()
            theirs = torch.nn.functional.cross_entropy(net(xt), yt)
            theirs.backward()
            reference.step()
            assert ours == pytest.approx(theirs.item(), rel=1e-5)  # the logits leave in float32
            losses.append(ours)
        assert abs(losses[1] - losses[0]) > 1  # lr 0.1 at batch 4 moves the loss a lot
        fc = model.get_layer("fc").kernel.numpy().T
        assert np.abs(fc - net.fc.weight.detach().numpy()).max() < 1e-4 * np.abs(fc).max()
        stem = model.get_layer("stem_conv").kernel.numpy().transpose(3, 2, 0, 1)
        assert np.abs(stem - net.conv1.weight.detach().numpy()).max() < 1e-4 * np.abs(stem).max()
        mean = model.get_layer("stem_bn").moving_mean.numpy()  # momentum 0.9 here == 0.1 in PyTorch
        assert np.allclose(mean, net.bn1.running_mean.numpy(), rtol=1e-5, atol=1e-8)
    finally:
        keras.config.set_floatx(floatx)
        keras.mixed_precision.set_global_policy(previous)


# ----------------------------------------------------------------------------- the step on tiny models (fast)


def _tiny_model(keras: Any, input_shape: tuple[int, ...]) -> Any:
    inputs = keras.Input(shape=input_shape)
    x = inputs
    if len(input_shape) == 3:
        x = keras.layers.Conv2D(4, 3, use_bias=False)(x)
        x = keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(3)(x)
    return keras.Model(inputs, keras.layers.Activation("linear", dtype="float32")(x))


def test_xla_step_slices_resident_data_at_runtime() -> None:
    """Resident data under XLA: a runtime start (no recompiling per step), same numbers as host feeding."""
    tf, keras = _tf()
    from bench_tensorflow.optimizer import make_sgd
    from bench_tensorflow.step import build_step

    rng = np.random.default_rng(1)
    images = rng.uniform(-1, 1, (10, 8, 8, 3)).astype(np.float32)
    labels = rng.integers(0, 3, 10).astype(np.int32)

    def fresh() -> tuple[Any, Any]:
        keras.utils.set_random_seed(1)
        model = _tiny_model(keras, (8, 8, 3))
        optimizer = make_sgd(keras, 0.1, 0.9, True, 1e-3)
        optimizer.build(model.trainable_variables)
        return model, optimizer

    xla_model, xla_opt = fresh()
    resident = (tf.constant(images), tf.constant(labels))
    xla_step = build_step(tf, xla_model, xla_opt, train=True, compile_function=True, jit_compile=True, resident=resident)
    host_model, host_opt = fresh()
    host_step = build_step(tf, host_model, host_opt, train=True, compile_function=False, jit_compile=False, resident=None)
    for start, size in ((0, 4), (4, 4), (8, 2)):  # the last batch is partial
        ours = float(xla_step(tf.constant(start, tf.int32), size))
        theirs = float(host_step(images[start : start + size], labels[start : start + size]))
        assert ours == pytest.approx(theirs, rel=1e-4)
    assert xla_step.experimental_get_tracing_count() == 2  # one per batch size, not per start
    for a, b in zip(xla_model.trainable_variables, host_model.trainable_variables, strict=True):
        assert np.allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    hlo = xla_step.experimental_get_compiler_ir(tf.constant(4, tf.int32), 4)(stage="hlo")
    assert "dynamic-slice" in hlo  # a constant-folded tf.slice would recompile for every start


def _loop_spec(steps_per_epoch: int, batch: int, window: int, epochs: int = 2, warmup: int = 1) -> Any:
    """What the harness's schedule reads of a spec."""
    from bench_engine.schedule import Schedule

    return Schedule(per_device=batch, steps_per_epoch=steps_per_epoch, epochs=epochs, warmup_steps=warmup, window_steps=window)


def test_several_steps_per_call_equal_single_steps_in_float64() -> None:
    """K steps in one XLA loop == the same steps one per call, in order (float64: agreement to
    rounding expected); a wrong order is far off, so the check can see an ordering mistake. Also:
    the setup compile leaves the state bit for bit as it was, and the calls made are the planned ones."""
    tf, keras = _tf()
    from bench_engine.dispatch import planned_dispatches
    from bench_engine.harness import Measurements, run_harness
    from bench_tensorflow.optimizer import make_sgd
    from bench_tensorflow.step import build_step
    from bench_tensorflow.workload import TensorFlowWorkload

    rng = np.random.default_rng(4)
    samples, batch, group = 10, 3, 3
    images = rng.uniform(-1, 1, (samples, 8, 8, 3))
    labels = rng.integers(0, 3, samples).astype(np.int32)
    # 2 epochs of steps 3, 3, 3, 1 (drop_last false), warmup 1, windows of 3, 3 steps per call
    spec = _loop_spec(steps_per_epoch=4, batch=batch, window=3)
    previous, floatx = keras.mixed_precision.global_policy(), keras.config.floatx()
    keras.config.set_floatx("float64")
    keras.mixed_precision.set_global_policy("float64")
    try:
        resident = (tf.constant(images), tf.constant(labels))

        def workload(steps: int) -> tuple[Any, list[Any]]:
            keras.utils.set_random_seed(4)
            model = _tiny_model(keras, (8, 8, 3))
            optimizer = make_sgd(keras, 0.1, 0.9, True, 1e-3)
            optimizer.build(model.trainable_variables)

            def build(k: int) -> Any:
                return build_step(tf, model, optimizer, train=True, compile_function=True, jit_compile=True, resident=resident, steps=k)

            made = TensorFlowWorkload(trainable_parameters=0, precision={}, data_placement="device", tf=tf, step_fn=build(1),
                                      multi_fn=build(steps) if steps > 1 else None, steps_per_dispatch=steps, full_size=batch,
                                      keep=[model, optimizer])
            return made, model.variables + optimizer.variables

        def values(variables: list[Any]) -> list[np.ndarray]:
            return [np.array(v.numpy()) for v in variables]

        looped, state = workload(group)
        plan = list(planned_dispatches(spec, samples, group))
        # epoch 1: [0] alone at the warmup's sync | [3, 6] queued, flushed step by step by the partial batch [9];
        # epoch 2: [0, 3, 6] in one call | [9]
        assert plan == [(3, (0,)), (3, (3,)), (3, (6,)), (1, (9,)), (3, (0, 3, 6)), (1, (9,))]
        before = values(state)
        looped.precompile(plan, state)  # runs each kind of call once, then puts the state back
        assert all(np.array_equal(a, b) for a, b in zip(before, values(state), strict=True)) and looped.last is None
        single_fn, multi_fn = looped.step_fn, looped.multi_fn
        assert (single_fn.experimental_get_tracing_count(), multi_fn.experimental_get_tracing_count()) == (2, 1)
        calls: list[tuple[int, tuple[int, ...]]] = []

        def record(fn: Any) -> Any:
            def recorded(starts: Any, size: int) -> Any:
                calls.append((size, tuple(int(s) for s in np.atleast_1d(starts.numpy()))))
                return fn(starts, size)

            return recorded

        looped.step_fn, looped.multi_fn = record(single_fn), record(multi_fn)
        run_harness(looped, spec, samples, Measurements())
        assert calls == plan
        assert (single_fn.experimental_get_tracing_count(), multi_fn.experimental_get_tracing_count()) == (2, 1)  # none at run time

        single, single_state = workload(1)
        run_harness(single, spec, samples, Measurements())
        ours, theirs = values(state), values(single_state)
        assert looped.loss() == pytest.approx(single.loss(), rel=1e-12)
        assert max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True)) <= 1e-12

        swapped, swapped_state = workload(1)  # the same batches, the first two swapped in every epoch
        for _ in range(2):
            for where, size in ((3, 3), (0, 3), (6, 3), (9, 1)):
                swapped.step_fn(tf.constant(where, tf.int32), size)
        assert max(float(np.abs(a - b).max()) for a, b in zip(ours, values(swapped_state), strict=True)) > 1e-6
    finally:
        keras.config.set_floatx(floatx)
        keras.mixed_precision.set_global_policy(previous)


def test_steps_per_dispatch_applies_to_the_whole_xla_step_on_device_data_only() -> None:
    """auto (the default) fits K on a GPU (told by the kind: no GPU needed), stays 1 on a CPU; an integer wins."""
    from bench_tensorflow.options import OPTION_DEFAULTS, optimizations, steps_per_dispatch

    # 50 steps an epoch of 8, 2 epochs, warmup 10, windows of 20: timed blocks 20 20 | 20 20 10
    spec = _loop_spec(steps_per_epoch=50, batch=8, window=20, warmup=10)

    def choose(value: Any = OPTION_DEFAULTS["steps_per_dispatch"], kind: str = "cuda", **changes: Any) -> Any:
        where = {"train": True, "xla": True, "resident": True, "world": 1, **changes}
        return steps_per_dispatch(value, kind=kind, plan=spec, samples=400, **where)

    fitted = choose()
    assert OPTION_DEFAULTS["steps_per_dispatch"] == "auto"
    assert (fitted.steps, fitted.reason) == (10, "auto: K=10 fitted to the timing blocks (9 calls for 90 timed steps)")
    on_cpu = choose(kind="cpu")
    assert on_cpu.steps == 1 and on_cpu.reason.startswith("auto: 1 (cpu: XLA's CPU while loop")
    assert (choose(4, kind="cpu").steps, choose(1).steps, choose(4).steps) == (4, 1, 4)  # an integer wins
    for changes in ({"train": False}, {"xla": False}, {"resident": False}, {"world": 2}):
        assert choose(4, **changes).steps == 1 and choose(**changes).steps == 1
    assert "several devices" in choose(world=2).reason and "device-resident" in choose(resident=False).reason
    switch = optimizations(True, True, "float32", True, False, False, fitted)["steps_per_dispatch"]
    assert switch.applied and switch.detail.startswith("10 full SGD steps per XLA call (auto: K=10 fitted")
    assert optimizations(True, True, "float32", True, False, False, on_cpu)["steps_per_dispatch"] == (False, on_cpu.reason)


def test_fp16_loss_scaling_unscales_before_coupled_l2() -> None:
    tf, keras = _tf()
    from bench_tensorflow.optimizer import make_sgd
    from bench_tensorflow.step import build_step

    lr, wd = 0.1, 0.5
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 6)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int32)
    previous = keras.mixed_precision.global_policy()
    try:
        keras.mixed_precision.set_global_policy("mixed_float16")
        keras.utils.set_random_seed(3)
        model = _tiny_model(keras, (6,))
        optimizer = keras.optimizers.LossScaleOptimizer(make_sgd(keras, lr, 0.9, False, wd))
        optimizer.build(model.trainable_variables)
        w0 = [v.numpy().copy() for v in model.trainable_variables]
        assert model.trainable_variables[0].dtype == "float32"
        with tf.GradientTape() as tape:  # the fp32 gradient at w0, by hand
            kernel, bias = (tf.constant(w) for w in w0)
            tape.watch([kernel, bias])
            logits = tf.matmul(x, kernel) + bias
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, [kernel, bias])
        step = build_step(tf, model, optimizer, train=True, compile_function=True, jit_compile=False, resident=None)
        assert float(step(x, y)) == pytest.approx(float(loss), rel=1e-2)
        assert float(optimizer.dynamic_scale.numpy()) == 2.0**15  # finite step: applied, scale kept
        for var, start, grad in zip(model.trainable_variables, w0, grads, strict=True):
            expected = start - lr * (grad.numpy() + wd * start)  # first momentum step: buffer = gradient
            assert np.allclose(var.numpy(), expected, rtol=2e-3, atol=2e-3)
    finally:
        keras.mixed_precision.set_global_policy(previous)


# --------------------------------------------------------------- the engine, end to end (CPU)


def _check_train(result: dict[str, Any], spec: dict[str, Any], steps: int, samples: int) -> None:
    work, measured = result["work"], result["measurements"]
    batch = spec["parity"]["batch"]["per_device"]
    assert result["engine"] == "tensorflow" and result["environment"]["framework"] == "TensorFlow"
    assert result["environment"]["device_kind"] == "cpu" and result["environment"]["framework_version"].startswith("2.")
    assert "keras" in result["environment"]["extra"]
    assert work["trainable_parameters"] == EXPECTED_10 == spec["expected"]["trainable_parameters"]
    assert work["dataset_sha256"] == spec["parity"]["dataset"]["sha256"]
    assert (work["steps"], work["samples"], work["epochs"]) == (steps, samples, 1)
    assert (work["batch_per_device"], work["batch_global"], work["world_size"]) == (batch, batch, 1)
    assert measured["warmup_steps"] == 1 and measured["steady"]["steps"] == steps - 1
    assert measured["steady"]["throughput"] > 0 and measured["peak_memory_bytes"] is None
    assert 1.0 < measured["loss_first"] < 5.0  # about ln(10) at initialisation
    assert np.isfinite(measured["final_loss"])


def _check_precision(work: dict[str, Any], precision: str) -> None:
    compute = {"fp32": "float32", "bf16": "bfloat16"}[precision]
    assert work["precision"] == {"name": precision, "compute_dtype": compute, "param_dtype": "float32",
                                 "tf32_matmul": False, "tf32_conv": False, "loss_scaling": False}
    assert work["optimizations"]["mixed_policy"]["applied"] is (precision == "bf16")
    assert work["optimizations"]["tf_function"]["applied"] is True


def test_fp32_optimized_and_baseline_agree(make_spec: Any, run_engine: Any) -> None:
    """Optimized (XLA, resident data) and baseline (plain graph, host feed) start from the same model."""
    results = {}
    for path in ("optimized", "baseline"):
        spec = make_spec("tensorflow", precision="fp32", path=path, batch=4, steps_per_epoch=2, warmup=1)
        if path == "baseline":
            spec["parity"]["data_placement"] = "host"
        result = results[path] = expect_ok(run_engine, spec)
        _check_train(result, spec, steps=2, samples=8)
        work = result["work"]
        _check_precision(work, "fp32")
        assert work["optimizations"]["xla"]["applied"] is (path == "optimized")
        assert work["optimizations"]["device_resident_data"]["applied"] is (path == "optimized")
        assert work["data_placement"] == ("device" if path == "optimized" else "host")
    # same seed, same first batch: XLA and the plain graph compute the same first loss
    first = {path: r["measurements"]["loss_first"] for path, r in results.items()}
    assert first["optimized"] == pytest.approx(first["baseline"], rel=2e-3)


def test_two_steps_per_dispatch(make_spec: Any, run_engine: Any) -> None:
    """Warmup step 0 alone (a one-step call at the sync), then steps 1 and 2 in one XLA loop."""
    spec = make_spec("tensorflow", precision="fp32", path="optimized", batch=4, steps_per_epoch=3, warmup=1,
                     options={"steps_per_dispatch": 2})
    spec["measurement"]["window_steps"] = 2
    result = expect_ok(run_engine, spec)
    _check_train(result, spec, steps=3, samples=12)
    measured, optimizations = result["measurements"], result["work"]["optimizations"]
    assert [w[:2] for w in measured["windows"]] == [[2, 8]]
    assert optimizations["steps_per_dispatch"]["applied"] is True and optimizations["xla"]["applied"] is True
    assert optimizations["steps_per_dispatch"]["detail"].startswith("2 full SGD steps per XLA call")
    expect_block_means(spec, measured)  # warmup [1] (one-step call), then [2] from one looping call


def test_bf16_optimized(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("tensorflow", precision="bf16", path="optimized", batch=4, steps_per_epoch=2, warmup=1)
    result = expect_ok(run_engine, spec)
    _check_train(result, spec, steps=2, samples=8)
    _check_precision(result["work"], "bf16")
    assert result["work"]["optimizations"]["xla"]["applied"] is True
    assert result["work"]["data_placement"] == "device"


def test_partial_batch_bf16_baseline_counts_every_sample(make_spec: Any, run_engine: Any) -> None:
    # 96 samples, batch 40, drop_last false: steps of 40, 40 and 16 samples (fed from the host)
    spec = make_spec("tensorflow", precision="bf16", path="baseline", batch=40, steps_per_epoch=3, warmup=1, drop_last=False)
    spec["parity"]["data_placement"] = "host"
    result = expect_ok(run_engine, spec)
    _check_train(result, spec, steps=3, samples=96)
    _check_precision(result["work"], "bf16")
    measured = result["measurements"]
    assert result["work"]["optimizations"]["xla"]["applied"] is False
    assert measured["epochs"] == [{"epoch": 1, "steps": 3, "samples": 96, "time_s": measured["epochs"][0]["time_s"]}]
    assert measured["steady"]["samples"] == 56 and [w[1] for w in measured["windows"]] == [40, 16]


def test_infer_reports_latency(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("tensorflow", mode="infer", batch=4, steps_per_epoch=3, warmup=1)
    result = expect_ok(run_engine, spec)
    work, measured = result["work"], result["measurements"]
    assert work["mode"] == "infer" and (work["steps"], work["samples"]) == (3, 12)
    assert work["optimizations"]["xla"]["applied"] is True
    latency = measured["latency_ms"]
    assert 0 < latency["min"] <= latency["p50"] <= latency["p99"] <= latency["max"]
    assert measured["final_loss"] is None and measured["loss_first"] is None


def test_fp16_on_cpu_fails_unsupported(make_spec: Any, run_engine: Any) -> None:
    result = expect_failed(run_engine, make_spec("tensorflow", precision="fp16", batch=4, steps_per_epoch=1), "unsupported")
    assert "fp16" in result["failure"]["message"]


def test_prepare_refuses_what_it_cannot_do(make_spec: Any) -> None:
    """In-process (no model is built): tf32 and cuda without a GPU, xla without tf_function, wrong geometry
    (options the engine.yaml schema refuses: tests/engines/test_engine_options.py)."""
    tf, _ = _tf()
    from bench_engine.api import UnsupportedError
    from bench_engine.data import Dataset, DatasetError
    from bench_tensorflow.engine import TensorFlowEngine

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("a GPU is visible")
    data = Dataset(images=np.zeros((96, 32, 32, 3), np.uint8), labels=np.zeros(96, np.int32), sha256="0" * 64)
    from bench_engine.contract import RunSpec

    engine = TensorFlowEngine()
    doc = make_spec("tensorflow", precision="tf32", batch=4, steps_per_epoch=1)
    assert engine.environment(RunSpec.from_json(doc)).device_kind == "cpu"
    with pytest.raises(UnsupportedError, match="tf32"):
        engine.prepare(RunSpec.from_json(doc), data)
    with pytest.raises(UnsupportedError, match="tf_function"):
        engine.prepare(RunSpec.from_json(make_spec("tensorflow", batch=4, steps_per_epoch=1, options={"xla": True, "tf_function": False})),
                       data)
    small = Dataset(images=np.zeros((96, 16, 16, 3), np.uint8), labels=np.zeros(96, np.int32), sha256="0" * 64)
    with pytest.raises(DatasetError, match="16, 16, 3"):
        engine.prepare(RunSpec.from_json(make_spec("tensorflow", batch=4, steps_per_epoch=1)), small)
    doc["device"] = "cuda"
    with pytest.raises(UnsupportedError, match="GPU"):
        TensorFlowEngine().environment(RunSpec.from_json(doc))


def test_wrong_dataset_hash_is_bad_spec(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("tensorflow", batch=4, steps_per_epoch=1)
    spec["parity"]["dataset"]["sha256"] = "0" * 64
    result = expect_failed(run_engine, spec, "bad_spec")
    assert "work" not in result and result["environment"]["framework_version"].startswith("2.")
