"""The block-mean verdict can fail: two real engines (PyTorch, JAX) from bench's shared weights, multi-step blocks,
the seed protocol's Adam; the honest pair agrees within the fp32 block-mean tolerance, and the same pair with
PyTorch's learning rate scaled 10x (a planted fault) is flagged ``parity_warning``."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from orchestrator.judge.trajectory import BLOCK_MEANS, STEPS, TrajectoryRun, numerical_parity
from orchestrator.model.initweights import RUN_FILE, write_init
from tests.engines.readback_helpers import REPO, tiny_dataset, tiny_spec
from tests.parity_docs import check_against_spec, expected_blocks

STEPS_RUN, BATCH, SIZE, WARMUP, WINDOW = 6, 4, 16, 2, 2  # the cheapest ResNet-50 geometry; blocks: warmup [2], windows [2] [2]


def _trajectory(spec: dict[str, Any], result: dict[str, Any]) -> TrajectoryRun:
    measured = result["measurements"]
    return TrajectoryRun(run_id=spec["run_id"], engine=spec["engine"], precision="fp32", key=("fp32",), repeat=1,
                         init_sha256=result["work"]["init"]["sha256"], losses=tuple(measured["losses"]),
                         block_losses=tuple(measured["block_losses"]))


def test_a_tenfold_learning_rate_breaks_the_block_mean_verdict(tmp_path: Path, run_engine: Any) -> None:
    data = tiny_dataset(tmp_path / "data", samples=BATCH * STEPS_RUN, size=SIZE)
    written, sha = write_init(tmp_path, "resnet50_v1.5", 10, 3, 0)
    written.rename(tmp_path / RUN_FILE)
    init = {"mode": "shared", "file": RUN_FILE, "sha256": sha, "format": "bench-init-v1"}
    adam = yaml.safe_load((REPO / "scenarios" / "opennn_seed.yaml").read_text())["workload"]["optimizer"]
    specs = {}
    for engine in ("jax", "pytorch"):
        spec = tiny_spec(engine, data, samples=BATCH * STEPS_RUN, size=SIZE, batch=BATCH, steps=STEPS_RUN, warmup=WARMUP,
                         init=init, optimizer=adam)
        spec["measurement"]["window_steps"] = WINDOW
        specs[engine] = spec
    specs["jax"]["engine_options"] = {"steps_per_dispatch": 2}  # the lax.scan path: one loss vector per call
    planted = copy.deepcopy(specs["pytorch"])
    planted["run_id"] = "pytorch-lr10x"
    planted["parity"]["optimizer"]["lr"] = adam["lr"] * 10
    specs["planted"] = planted
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(specs, pool.map(run_engine, specs.values()), strict=True))
    trajectories = {}
    for name, spec in specs.items():
        code, result, log = runs[name]
        assert code == 0 and result is not None and result["status"] == "ok", log[-3000:]
        assert check_against_spec(spec, result, "cpu") == [], name  # one finite mean per block: 3
        assert len(result["measurements"]["block_losses"]) == expected_blocks(spec) == 3
        trajectories[name] = _trajectory(spec, result)
    # a block mean is the mean of its steps (the first K per-step losses cover every step here)
    for name in ("jax", "pytorch"):
        steps, blocks = trajectories[name].losses, trajectories[name].block_losses
        assert all(abs(blocks[i] - (steps[2 * i] + steps[2 * i + 1]) / 2) < 1e-5 for i in range(3)), (name, steps, blocks)

    honest = {v.kind: v for v in numerical_parity([trajectories["jax"], trajectories["pytorch"]])}
    assert honest[BLOCK_MEANS].verdict == "ok" and honest[BLOCK_MEANS].compared == 3, honest
    assert honest[STEPS].verdict == "ok", honest
    faulty = {v.kind: v for v in numerical_parity([trajectories["jax"], trajectories["planted"]])}
    verdict = faulty[BLOCK_MEANS]
    assert verdict.verdict == "parity_warning" and verdict.max_rel_dev > verdict.tolerance, verdict
    assert verdict.reason is not None and "block" in verdict.reason
