"""Shared initial weights, loss-trajectory verdicts and the statistics' interval labels."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from orchestrator.errors import BadInput
from orchestrator.initweights import canonical_sha256, generate, resnet50_tensors, write_init
from orchestrator.models import trainable_parameters
from orchestrator.stats import sample_summary
from orchestrator.summary import summarize
from orchestrator.trajectory import compare_losses, numerical_parity, tolerance

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "common"))
from bench_engine import initweights as engine_side


@pytest.fixture(scope="module")
def init_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return write_init(tmp_path_factory.mktemp("init"), "resnet50_v1.5", 10, 3, 0)


def test_layout_matches_the_analytic_count() -> None:
    layout = resnet50_tensors(10)
    trainable = sum(int(np.prod(shape)) for name, _, shape in layout if name.endswith((".weight", ".bias")))
    assert trainable == trainable_parameters("resnet50_v1.5", 10) == 23_528_522
    assert len(layout) == 267 and layout[0] == ("conv1.weight", "conv", (64, 3, 7, 7)) and layout[-2][2] == (10, 2048)


def test_every_residual_branch_starts_at_zero() -> None:
    """The last BatchNorm scale of each of the 16 bottlenecks is 0 (zero-init residual); every other scale is 1."""
    tensors = generate("resnet50_v1.5", 10, 3, 0)
    scales = {name: tensors[name] for name, kind, _ in resnet50_tensors(10) if kind == "bn.weight"}
    branch_ends = [name for name in scales if name.endswith(".bn3.weight")]
    assert len(branch_ends) == 16 and all(not tensors[name].any() for name in branch_ends)
    assert all((tensor == 1).all() for name, tensor in scales.items() if name not in branch_ends)
    assert (tensors["layer1.0.bn3.running_var"] == 1).all()  # only the scale, not the statistics


def test_file_round_trip_and_hash_agree_on_both_sides(init_file: tuple[Path, str]) -> None:
    path, sha = init_file
    tensors, meta = engine_side.read_init(path)
    assert meta["format"] == "bench-init-v1" and meta["sha256"] == sha
    assert list(tensors)[:2] == ["conv1.weight", "bn1.weight"]  # definition order
    assert engine_side.canonical_sha256(tensors) == sha == canonical_sha256(generate("resnet50_v1.5", 10, 3, 0))
    std = float(tensors["layer3.0.conv2.weight"].std())
    assert abs(std - (2 / (256 * 9)) ** 0.5) < 0.002  # kaiming normal, fan out
    tensors["fc.bias"] = tensors["fc.bias"].copy()
    tensors["fc.bias"][0] += 1e-6  # one value changed: another hash
    assert engine_side.canonical_sha256(tensors) != sha
    assert canonical_sha256(generate("resnet50_v1.5", 10, 3, 1)) != sha  # the seed matters


def test_arch_without_shared_layout_is_refused() -> None:
    with pytest.raises(BadInput, match=r"workload\.init"):
        generate("tresnet_m", 10, 3, 0)


def test_corrupt_file_is_an_init_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{nope")
    with pytest.raises(engine_side.InitError):
        engine_side.read_init(bad)


def test_trajectory_tolerance_grows_and_mismatched_losses_fail() -> None:
    assert tolerance("fp32", 1) == 1e-3 and tolerance("fp32", 5) > tolerance("fp32", 1) and tolerance("bf16", 1) > tolerance("fp32", 1)
    base = [2.30, 2.28, 2.25, 2.21, 2.18]
    assert compare_losses(base, [v * (1 + 5e-4) for v in base], "fp32")["ok"]
    assert not compare_losses(base, [*base[:4], base[4] * 1.02], "fp32")["ok"]  # step 5 bound: 1.6e-2
    off = compare_losses(base, [base[0] * 1.01, *base[1:]], "fp32")  # step 1 off by 1%
    assert not off["ok"] and off["first_fail"]["step"] == 1 and off["at_step"] == 1
    assert not compare_losses(base, [float("nan"), *base[1:]], "fp32")["ok"]
    assert compare_losses(base, [base[0] * 1.01, *base[1:]], "bf16")["ok"]  # bf16's looser bound
    # bf16 grows 1.5x per step up to 0.2: 6.1% at step 4 (measured between engines on the smoke) passes, 25% never does
    assert tolerance("bf16", 4) == pytest.approx(0.10125) and tolerance("bf16", 20) == 0.2
    assert compare_losses(base, [*base[:3], base[3] * 1.061, base[4]], "bf16")["ok"]
    assert not compare_losses(base, [*base[:4], base[4] * 1.25], "bf16")["ok"]


def _run(engine: str, losses: list[float], sha: str | None = "a" * 64) -> tuple[dict, dict]:
    record = {"run_id": f"{engine}-fp32-optimized-b32-d1-r1", "engine": engine, "precision": "fp32", "path": "optimized",
              "batch_per_device": 32, "devices": 1, "repeat": 1, "status": "ok", "throughput": 100.0}
    result = {"work": {"init": {"mode": "shared" if sha else "framework", "sha256": sha}, "samples": 64},
              "measurements": {"losses": losses, "setup_s": 1.0, "warmup_s": 1.0, "steady": {}}}
    return record, result


def test_summary_flags_an_out_of_tolerance_pair_and_keeps_the_runs() -> None:
    losses = [2.3, 2.2, 2.1]
    summary = summarize("s", "id", True, [_run("a", losses), _run("b", [2.3, 2.5, 2.1]), _run("c", losses)])
    verdicts = {tuple(v["engines"]): v for v in summary["numerical_parity"]}
    assert verdicts[("a", "c")]["verdict"] == "ok" and verdicts[("a", "c")]["max_rel_dev"] == 0.0
    assert verdicts[("a", "b")]["verdict"] == "parity_warning" and verdicts[("a", "b")]["at_step"] == 2
    rows = {row["engine"]: row for row in summary["runs"]}
    assert "a vs b" in rows["b"]["parity_warning"] and "a vs b" in rows["a"]["parity_warning"]  # every member of a failing pair
    assert all(row["status"] == "ok" for row in rows.values())  # kept, only flagged
    agreeing = summarize("s", "id", True, [_run("a", losses), _run("c", losses)])
    assert not any("parity_warning" in row for row in agreeing["runs"])


def test_different_or_framework_weights_give_no_verdict() -> None:
    verdicts = numerical_parity([
        {"run_id": "x", "engine": "a", "precision": "fp32", "key": ("fp32",), "repeat": 1, "init": {"sha256": "a" * 64}, "losses": [1.0]},
        {"run_id": "y", "engine": "b", "precision": "fp32", "key": ("fp32",), "repeat": 1, "init": {"sha256": "b" * 64}, "losses": [1.0]},
    ])
    assert verdicts[0]["verdict"] == "n/a"


def test_fewer_than_five_repeats_give_a_range_not_a_ci() -> None:
    few = sample_summary([10.0, 11.0, 12.0])
    assert few["ci95"] is None and few["interval"] == {"kind": "range", "low": 10.0, "high": 12.0}
    many = sample_summary([10.0, 11.0, 12.0, 10.5, 11.5])
    assert many["interval"]["kind"] == "ci95" and many["ci95"] is not None


def test_ratios_are_one_direction_against_the_reference() -> None:
    runs = [_run("a", []), _run("b", []), _run("c", [])]
    runs[1][0]["throughput"] = 200.0
    summary = summarize("s", "id", True, runs, reference="b")
    assert {(r["engine"], r["baseline_engine"]) for r in summary["ratios"]} == {("a", "b"), ("c", "b")}
    assert all(r["ratio"] == 0.5 and r["interval"] == "range" for r in summary["ratios"])
