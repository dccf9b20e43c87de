"""Shared initial weights, loss-trajectory verdicts and the statistics' interval labels."""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from orchestrator.errors import BadInput
from orchestrator.judge.stats import sample_summary
from orchestrator.judge.trajectory import (
    BLOCK_MEAN_TOLERANCE,
    TrajectoryRun,
    compare_block_means,
    compare_losses,
    numerical_parity,
    tolerance,
)
from orchestrator.model.initweights import canonical_sha256, generate, resnet50_tensors, write_init
from orchestrator.model.layers import trainable_parameters
from tests.conftest import load_schema
from tests.typed_docs import summarize_docs as summarize

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
    assert compare_losses(base, [v * (1 + 5e-4) for v in base], "fp32").ok
    assert not compare_losses(base, [*base[:4], base[4] * 1.02], "fp32").ok  # step 5 bound: 1.6e-2
    off = compare_losses(base, [base[0] * 1.01, *base[1:]], "fp32")  # step 1 off by 1%
    assert not off.ok and off.first_fail is not None and off.first_fail[0] == 0 and off.at == 0 and off.compared == 5
    assert not compare_losses(base, [float("nan"), *base[1:]], "fp32").ok
    assert compare_losses(base, [base[0] * 1.01, *base[1:]], "bf16").ok  # bf16's looser bound
    # bf16 grows 1.5x per step up to 0.2: 6.1% at step 4 (measured between engines on the smoke) passes, 25% never does
    assert tolerance("bf16", 4) == pytest.approx(0.10125) and tolerance("bf16", 20) == 0.2
    assert compare_losses(base, [*base[:3], base[3] * 1.061, base[4]], "bf16").ok
    assert not compare_losses(base, [*base[:4], base[4] * 1.25], "bf16").ok


def _run(engine: str, losses: list[float], sha: str | None = "a" * 64, block_losses: list[float] | None = None) -> tuple[dict, dict]:
    record = {"run_id": f"{engine}-fp32-optimized-b32-d1-r1", "engine": engine, "precision": "fp32", "path": "optimized",
              "batch_per_device": 32, "devices": 1, "repeat": 1, "status": "ok", "throughput": 100.0}
    measurements = {"losses": losses, "setup_s": 1.0, "warmup_s": 1.0, "steady": {}}
    if block_losses is not None:
        measurements["block_losses"] = block_losses
    result = {"work": {"init": {"mode": "shared" if sha else "framework", "sha256": sha}, "samples": 64}, "measurements": measurements}
    return record, result


def test_summary_flags_an_out_of_tolerance_pair_and_keeps_the_runs() -> None:
    losses = [2.3, 2.2, 2.1]
    summary = summarize("s", "id", True, [_run("a", losses), _run("b", [2.3, 2.5, 2.1]), _run("c", losses)])
    verdicts = {tuple(v["engines"]): v for v in summary["numerical_parity"]}
    assert {v["kind"] for v in summary["numerical_parity"]} == {"steps"}  # no block losses: no block-mean rows
    assert verdicts[("a", "c")]["verdict"] == "ok" and verdicts[("a", "c")]["max_rel_dev"] == 0.0
    assert verdicts[("a", "b")]["verdict"] == "parity_warning" and verdicts[("a", "b")]["at_step"] == 2
    rows = {row["engine"]: row for row in summary["runs"]}
    assert "a vs b" in rows["b"]["parity_warning"] and "a vs b" in rows["a"]["parity_warning"]  # every member of a failing pair
    assert all(row["status"] == "ok" for row in rows.values())  # kept, only flagged
    agreeing = summarize("s", "id", True, [_run("a", losses), _run("c", losses)])
    assert not any("parity_warning" in row for row in agreeing["runs"])


def test_different_or_framework_weights_give_no_verdict() -> None:
    verdicts = numerical_parity([
        TrajectoryRun("x", "a", "fp32", ("fp32",), 1, "a" * 64, losses=(1.0,), block_losses=(1.0,)),
        TrajectoryRun("y", "b", "fp32", ("fp32",), 1, "b" * 64, losses=(1.0,), block_losses=(1.0,)),
        TrajectoryRun("z", "c", "fp32", ("fp32",), 1, None, block_losses=(1.0,)),
    ])
    assert [(v.kind, v.verdict) for v in verdicts] == [("steps", "n/a"), *[("block_means", "n/a")] * 3]


def test_block_mean_tolerance_is_constant_and_a_drifting_pair_fails() -> None:
    assert BLOCK_MEAN_TOLERANCE == {"fp32": 2e-2, "tf32": 5e-2, "bf16": 1e-1, "fp16": 1e-1}
    base = [2.40, 2.31, 2.20, 2.12, 2.05]
    close = compare_block_means(base, [v * (1 + 1.5e-2) for v in base], "fp32")
    assert close.ok and close.compared == 5 and close.tolerance == 2e-2
    drift = compare_block_means(base, [*base[:3], base[3] * 1.03, base[4] * 1.05], "fp32")  # block 3 off by 3%
    assert not drift.ok and drift.first_fail is not None and drift.first_fail[0] == 3 and drift.at == 4
    assert compare_block_means(base, [*base[:3], base[3] * 1.03, base[4]], "bf16").ok  # bf16's looser bound
    assert not compare_block_means(base, [float("nan"), *base[1:]], "bf16").ok


def test_block_means_give_a_verdict_where_per_step_losses_are_missing() -> None:
    """OpenNN at the seed protocol: multi-step blocks, so block means only; the other engines have both kinds."""
    blocks = [2.40, 2.31, 2.20, 2.12]
    runs = [_run("opennn", [], block_losses=[v * 1.004 for v in blocks]), _run("pytorch", [2.3, 2.2], block_losses=blocks),
            _run("jax", [2.3, 2.2], block_losses=[*blocks[:2], blocks[2] * 1.1, blocks[3]])]
    summary = summarize("s", "id", True, runs)
    rows = {(v["kind"], *v["engines"]): v for v in summary["numerical_parity"]}
    assert set(rows) == {("steps", "jax", "pytorch"), ("block_means", "jax", "opennn"), ("block_means", "jax", "pytorch"),
                         ("block_means", "opennn", "pytorch")}
    honest = rows[("block_means", "opennn", "pytorch")]
    assert honest["verdict"] == "ok" and honest["blocks"] == 4 and honest["tolerance"] == 2e-2
    assert honest["max_rel_dev"] == pytest.approx(0.004 / 1.004) and "at_step" not in honest
    planted = rows[("block_means", "jax", "pytorch")]
    assert planted["verdict"] == "parity_warning" and planted["at_block"] == 2 and "block 2" in planted["reason"]
    assert rows[("steps", "jax", "pytorch")]["verdict"] == "ok"
    item = load_schema("summary")["properties"]["numerical_parity"]["items"]
    for row in summary["numerical_parity"]:
        jsonschema.validate(row, item)
    flagged = {row["engine"]: row.get("parity_warning") for row in summary["runs"]}
    assert "(block_means)" in flagged["jax"] and "opennn vs pytorch" not in (flagged["opennn"] or "")


def test_fewer_than_five_repeats_give_a_range_not_a_ci() -> None:
    few = sample_summary([10.0, 11.0, 12.0])
    assert few.ci95 is None and few.interval.to_json() == {"kind": "range", "low": 10.0, "high": 12.0}
    many = sample_summary([10.0, 11.0, 12.0, 10.5, 11.5])
    assert many.interval.kind == "ci95" and many.ci95 is not None


def test_ratios_are_one_direction_against_the_reference() -> None:
    runs = [_run("a", []), _run("b", []), _run("c", [])]
    runs[1][0]["throughput"] = 200.0
    summary = summarize("s", "id", True, runs, reference="b")
    assert {(r["engine"], r["baseline_engine"]) for r in summary["ratios"]} == {("a", "b"), ("c", "b")}
    assert all(r["ratio"] == 0.5 and r["interval"] == "range" for r in summary["ratios"])
