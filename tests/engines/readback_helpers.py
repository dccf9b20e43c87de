"""In-process engine runs for the read-back tests: a tiny spec, prepare only, the parity check on the result."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def add_paths(engine: str) -> None:
    for path in (REPO / "images" / "common", REPO / "images" / engine):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


def tiny_dataset(folder: Path, samples: int = 16, size: int = 16) -> tuple[Path, str]:
    """A canonical split of random 16x16 RGB images (the engines' cheapest ResNet-50 geometry)."""
    add_paths("pytorch")
    from bench_engine.data import split_sha256

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    np.save(folder / "images.npy", rng.integers(0, 256, size=(samples, size, size, 3), dtype=np.uint8))
    np.save(folder / "labels.npy", rng.integers(0, 10, size=samples).astype(np.int32))
    return folder, split_sha256(folder)


def tiny_spec(engine: str, data: tuple[Path, str], precision: str = "fp32", path: str = "optimized", samples: int = 16,
              size: int = 16, batch: int = 4, steps: int = 4, warmup: int = 1, init: dict[str, Any] | None = None,
              optimizer: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = json.loads((FIXTURES / "example-run-spec.json").read_text())
    spec.update(engine=engine, run_id=f"{engine}-{precision}", device="cpu", path=path, engine_options={})
    parity = spec["parity"]
    parity["input"] = {"height": size, "width": size, "channels": 3}
    parity["dataset"].update(path=str(data[0]), sha256=data[1], samples=samples)
    parity["batch"] = {"per_device": batch, "global": batch, "drop_last": True}
    parity.update(precision=precision, epochs=1, steps_per_epoch=steps, total_steps=steps, warmup_steps=warmup)
    parity["init"] = init or {"mode": "framework"}
    if optimizer:
        parity["optimizer"] = optimizer
    return copy.deepcopy(spec)


def prepared_mismatches(engine: Any, spec: dict[str, Any]) -> list[str]:
    """Prepare the workload (no steps), report it as if the loop ran the spec's steps; the parity fields that differ."""
    from bench_engine.contract import RunSpec
    from bench_engine.data import load_dataset
    from bench_engine.harness import Measurements
    from bench_engine.main import _work
    from tests.parity_docs import check_against_spec, expected_samples

    parity = spec["parity"]
    data = load_dataset(parity["dataset"]["path"], parity["dataset"]["sha256"])
    typed = RunSpec.from_json(spec)
    engine.environment(typed)
    workload = engine.prepare(typed, data)
    counted = Measurements(steps_done=parity["total_steps"], samples_done=expected_samples(spec), epochs_done=parity["epochs"],
                           batch_max=parity["batch"]["global"])
    work = _work(typed, workload, (data.sha256, data.samples), counted, None).to_json()
    result = {"schema_version": 1, "run_id": typed.run_id, "engine": typed.engine, "status": "ok",
              "environment": {"device_kind": "cpu"}, "work": work}
    # no step ran, so there are no block losses to check: only the read-back work fields count here
    return [m["field"] for m in check_against_spec(spec, result, "cpu") if m["field"] != "measurements.block_losses"]
