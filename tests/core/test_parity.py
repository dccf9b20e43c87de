"""Parity checks against the spec and across engines."""

from __future__ import annotations

import copy

from bench_engine.contract import EngineResult, ResultMeasurements, RunSpec
from orchestrator.judge import parity
from orchestrator.judge.parity import CrossRun, canonical_dtype

# The fixtures are JSON documents (as the files hold them); these read them as the typed objects parity checks.


def _spec(doc):
    return RunSpec.from_json(doc)


def _result(doc, device_kind):
    measurements = doc.get("measurements") or {}
    return EngineResult(schema_version=1, run_id="r", engine="e", status="ok", environment={"device_kind": device_kind},
                        work=doc.get("work"), measurements=ResultMeasurements(
                            setup_s=0.0, warmup_s=0.0, warmup_steps=1, steady={}, block_losses=tuple(measurements.get("block_losses") or ())))


def check_against_spec(spec, result, device_kind):
    return [m.to_json() for m in parity.check_against_spec(_spec(spec), _result(result, device_kind))]


def expected_samples(spec):
    return parity.expected_samples(_spec(spec))


def expected_blocks(spec):
    return parity.expected_blocks(_spec(spec))


def cross_engine(runs):
    flagged = parity.cross_engine([CrossRun(r["run_id"], r["engine"], r["key"], r["work"]) for r in runs])
    return {run_id: [m.to_json() for m in mismatches] for run_id, mismatches in flagged.items()}


def make_spec(samples=100, batch=32, steps=3, epochs=2, precision="fp32"):
    return {
        "schema_version": 1, "run_id": "r", "scenario": "s", "engine": "e", "path": "optimized", "device": "cpu", "smoke": False,
        "repeat": 1, "engine_options": {},
        "parity": {
            "mode": "train", "model": {"arch": "resnet50_v1.5", "num_classes": 10},
            "input": {"height": 32, "width": 32, "channels": 3},
            "dataset": {"name": "cifar10", "path": "/data", "sha256": "a" * 64, "samples": samples, "split": "train"},
            "batch": {"per_device": batch, "global": batch, "drop_last": steps * batch <= samples},
            "devices": 1, "epochs": epochs, "steps_per_epoch": steps, "total_steps": steps * epochs,
            "precision": precision, "data_placement": "device", "seed": 0, "warmup_steps": 1,
            "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-5, "nesterov": False},
            "loss": "cross_entropy", "init": {"mode": "shared", "file": "init.safetensors", "sha256": "c" * 64, "format": "bench-init-v1"},
        },
        "measurement": {"window_steps": 2, "timeout_s": 60, "max_step_samples": 1000},
        "expected": {"trainable_parameters": 23528522},
    }


def make_result(spec, **overrides):
    parity = spec["parity"]
    work = {
        "mode": "train", "arch": "resnet50_v1.5", "num_classes": 10, "input_shape": [32, 32, 3],
        "trainable_parameters": 23528522, "dataset_sha256": "a" * 64, "dataset_samples": parity["dataset"]["samples"],
        "batch_per_device": parity["batch"]["per_device"], "batch_global": parity["batch"]["global"], "world_size": 1,
        "drop_last": parity["batch"]["drop_last"], "epochs": parity["epochs"], "steps": parity["total_steps"],
        "samples": expected_samples(spec), "data_placement": "device",
        "precision": {"name": parity["precision"], "compute_dtype": "float32", "param_dtype": "float32",
                      "tf32_matmul": False, "tf32_conv": False, "loss_scaling": False},
        "param_dtypes": ["float32"],
        "observed": {"compute_dtype": canonical_dtype(parity["precision"]) if parity["precision"] in ("bf16", "fp16") else "float32",
                     "grad_dtype": "float32", "logits_dtype": "float32"},
        "optimizer": {"name": "sgd", "class": "torch.optim.sgd.SGD", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-5,
                      "nesterov": False, "betas": None, "eps": None},
        "loss": {"name": "cross_entropy", "class": "torch.nn.modules.loss.CrossEntropyLoss", "reduction": "mean", "label_smoothing": 0.0},
        "init": {"mode": "shared", "sha256": "c" * 64},
    }
    work.update(overrides)
    return {"work": work, "measurements": {"block_losses": [2.3 - 0.01 * i for i in range(expected_blocks(spec))]}}


def test_partial_batches_count_their_real_size():
    spec = make_spec(samples=100, batch=32, steps=4, epochs=2)  # 32+32+32+4 per epoch
    assert expected_samples(spec) == 200
    assert expected_samples(make_spec(samples=100, batch=32, steps=3, epochs=2)) == 192


def test_matching_result_has_no_mismatch():
    spec = make_spec()
    assert check_against_spec(spec, make_result(spec), "cuda") == []


def test_each_field_mismatch_is_named():
    spec = make_spec()
    cases = {
        "trainable_parameters": {"trainable_parameters": 23528523},
        "dataset.sha256": {"dataset_sha256": "b" * 64},
        "samples": {"samples": 1},
        "steps": {"steps": 5},
        "epochs": {"epochs": 1},
        "batch.global": {"batch_global": 64},
        "data_placement": {"data_placement": "host"},
        "input": {"input_shape": [32, 32, 1]},
        "model.num_classes": {"num_classes": 100},
        "param_dtypes": {"param_dtypes": ["bfloat16"]},
        "observed.compute_dtype": {"observed": {"compute_dtype": "bfloat16", "grad_dtype": "float32", "logits_dtype": "float32"}},
        "observed.grad_dtype": {"observed": {"compute_dtype": "float32", "grad_dtype": "bfloat16", "logits_dtype": "float32"}},
        "observed": {"observed": None},
        "init.sha256": {"init": {"mode": "shared", "sha256": "d" * 64}},
        "init.mode": {"init": {"mode": "framework", "sha256": None}},
        "optimizer": {"optimizer": None},
        "loss": {"loss": None},
    }
    for field, override in cases.items():
        mismatches = check_against_spec(spec, make_result(spec, **override), "cuda")
        assert field in [m["field"] for m in mismatches], field


def test_precision_policy_must_match_the_name():
    spec = make_spec(precision="bf16")
    result = make_result(spec)
    result["work"]["precision"].update(name="bf16", compute_dtype="float32")
    fields = [m["field"] for m in check_against_spec(spec, result, "cuda")]
    assert fields == ["precision.compute_dtype"]
    result = make_result(spec)  # the policy says bf16, the traced step computed fp32
    result["work"]["precision"].update(name="bf16", compute_dtype="bfloat16")
    result["work"]["observed"]["compute_dtype"] = "float32"
    assert [m["field"] for m in check_against_spec(spec, result, "cuda")] == ["observed.compute_dtype"]
    spec = make_spec(precision="fp32")
    result = make_result(spec)
    result["work"]["precision"]["tf32_conv"] = True
    assert [m["field"] for m in check_against_spec(spec, result, "cuda")] == ["precision.tf32_conv"]
    assert check_against_spec(spec, result, "cpu") == []  # TF32 does not exist on CPU


def test_canonical_dtype():
    assert canonical_dtype("torch.bfloat16") == "bfloat16"
    assert canonical_dtype("mixed_float16") == "float16"
    assert canonical_dtype("float32") == "float32"


def test_cross_engine_flags_the_odd_one_out():
    spec = make_spec()
    base = make_result(spec)["work"]
    odd = copy.deepcopy(base)
    odd["trainable_parameters"] += 10
    runs = [
        {"run_id": "a", "engine": "pytorch", "key": "fp32", "work": base},
        {"run_id": "b", "engine": "jax", "key": "fp32", "work": copy.deepcopy(base)},
        {"run_id": "c", "engine": "tensorflow", "key": "fp32", "work": odd},
    ]
    flagged = cross_engine(runs)
    assert list(flagged) == ["c"]
    assert flagged["c"][0]["field"] == "trainable_parameters" and "pytorch" in flagged["c"][0]["against"]


def test_cross_engine_tie_marks_both_and_ignores_single_engines():
    spec = make_spec()
    a, b = make_result(spec)["work"], make_result(spec)["work"]
    b["samples"] = 7
    flagged = cross_engine([{"run_id": "a", "engine": "x", "key": 1, "work": a}, {"run_id": "b", "engine": "y", "key": 1, "work": b}])
    assert set(flagged) == {"a", "b"}
    assert cross_engine([{"run_id": "a", "engine": "x", "key": 1, "work": a}, {"run_id": "b", "engine": "x", "key": 1, "work": b}]) == {}


def test_optimizer_read_back_is_compared_field_by_field():
    spec = make_spec()
    for key, value in (("momentum", 0.8), ("lr", 0.1001), ("weight_decay", 0.0), ("nesterov", True), ("name", "adam")):
        result = make_result(spec)
        result["work"]["optimizer"][key] = value
        assert [m["field"] for m in check_against_spec(spec, result, "cpu")] == [f"optimizer.{key}"], key
    result = make_result(spec)
    result["work"]["optimizer"]["lr"] = 0.1 * (1 + 1e-8)  # a float32 round trip is not a mismatch
    assert check_against_spec(spec, result, "cpu") == []


def test_adam_read_back_compares_betas_and_eps():
    spec = make_spec()
    spec["parity"]["optimizer"] = {"name": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}
    adam = {"name": "adam", "class": "torch.optim.adam.Adam", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8,
            "weight_decay": 0.0, "momentum": None, "nesterov": None}
    assert check_against_spec(spec, make_result(spec, optimizer=adam), "cpu") == []
    for key, value in (("betas", [0.9, 0.99]), ("eps", 1e-7)):
        wrong = {**adam, key: value}
        assert [m["field"] for m in check_against_spec(spec, make_result(spec, optimizer=wrong), "cpu")] == [f"optimizer.{key}"]


def test_loss_read_back_must_be_mean_cross_entropy():
    spec = make_spec()
    for key, value in (("name", "mse"), ("reduction", "sum"), ("label_smoothing", 0.1)):
        result = make_result(spec)
        result["work"]["loss"][key] = value
        assert [m["field"] for m in check_against_spec(spec, result, "cpu")] == [f"loss.{key}"]


def test_every_block_of_a_training_run_has_its_finite_mean_loss():
    spec = make_spec(samples=100, batch=32, steps=3, epochs=2)  # per epoch: warmup [1] + window [2]; then [2] [1]
    assert expected_blocks(spec) == 4
    assert check_against_spec(spec, make_result(spec), "cpu") == []
    for block_losses, actual in (([2.3, 2.2, 2.1], "3 values"), (None, "missing"), ([], "missing")):
        result = make_result(spec)
        if block_losses is None:
            del result["measurements"]["block_losses"]
        else:
            result["measurements"]["block_losses"] = block_losses
        [mismatch] = check_against_spec(spec, result, "cpu")
        assert mismatch["field"] == "measurements.block_losses" and mismatch["actual"] == actual
    result = make_result(spec)
    result["measurements"]["block_losses"][2] = float("nan")
    [mismatch] = check_against_spec(spec, result, "cpu")
    assert mismatch["field"] == "measurements.block_losses" and "block 2" in mismatch["actual"]
    inference = make_spec()
    inference["parity"]["mode"] = "infer"
    result = make_result(inference, mode="infer", optimizer=None, loss=None)
    del result["measurements"]["block_losses"]
    assert "measurements.block_losses" not in [m["field"] for m in check_against_spec(inference, result, "cpu")]
