"""Same network, same start, same updates: every engine loads bench's shared weights (same sha256 read back) and
the first 5 losses of the smoke geometry (CPU, 32x32, batch 32) agree within the fp32 tolerance of
``orchestrator.judge.trajectory``, with the cifar scenario's SGD (lr 0.1, a loss that climbs steeply) and with the seed
protocol's Adam (lr 1e-3)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.judge.trajectory import compare_losses
from orchestrator.model.initweights import RUN_FILE, write_init
from tests.engines.readback_helpers import REPO, tiny_dataset, tiny_spec
from tests.parity_docs import check_against_spec

ENGINES = ("pytorch", "jax", "tensorflow")
SCENARIOS = {"sgd": "cifar_resnet50.yaml", "adam": "opennn_seed.yaml"}
STEPS, BATCH = 5, 32


def scenario_optimizer(name: str) -> dict[str, Any]:
    """The optimizer block of the scenario the test stands for (its real settings, not test-only ones)."""
    return yaml.safe_load((REPO / "scenarios" / SCENARIOS[name]).read_text())["workload"]["optimizer"]


@pytest.mark.parametrize("optimizer", sorted(SCENARIOS))
def test_engines_start_equal_and_follow_the_same_trajectory(optimizer: str, tmp_path: Path, run_engine: Any) -> None:
    data = tiny_dataset(tmp_path / "data", samples=BATCH * STEPS, size=32)
    written, sha = write_init(tmp_path, "resnet50_v1.5", 10, 3, 0)
    written.rename(tmp_path / RUN_FILE)  # beside the spec files: the relative name resolves against the spec's folder
    init = {"mode": "shared", "file": RUN_FILE, "sha256": sha, "format": "bench-init-v1"}
    settings = scenario_optimizer(optimizer)
    assert settings["name"] == optimizer
    specs = {}
    for engine in ENGINES:
        specs[engine] = tiny_spec(engine, data, samples=BATCH * STEPS, size=32, batch=BATCH, steps=STEPS, warmup=1,
                                  init=init, optimizer=settings)
        specs[engine]["run_id"] = f"{engine}-{optimizer}"
    with ThreadPoolExecutor(max_workers=2) as pool:  # two engine processes at a time: their compiles overlap
        runs = dict(zip(ENGINES, pool.map(run_engine, specs.values()), strict=True))
    losses: dict[str, list[float]] = {}
    for engine, spec in specs.items():
        code, result, log = runs[engine]
        assert code == 0 and result is not None and result["status"] == "ok", log[-3000:]
        assert check_against_spec(spec, result, "cpu") == [], engine
        assert result["work"]["init"] == {"mode": "shared", "sha256": sha}
        assert result["work"]["optimizer"]["name"] == optimizer
        losses[engine] = result["measurements"]["losses"]
        assert len(losses[engine]) == STEPS
    # the loss really moves, so agreeing on it says the updates agree (measured: SGD 2.49 -> 18.0, Adam 2.49 -> 2.63)
    assert abs(losses["pytorch"][-1] - losses["pytorch"][0]) > 0.05, losses
    for other in ENGINES[1:]:
        # measured: step 1 to 4e-7, steps 2-5 to 2.2e-3 (SGD, TensorFlow at step 5) and 5e-5 (Adam)
        verdict = compare_losses(losses["pytorch"], losses[other], "fp32")
        assert verdict.ok and verdict.compared == STEPS, f"{other}: {verdict} {losses}"
