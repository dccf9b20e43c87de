"""The JAX workload places every batch start the harness's schedule will use before timing starts
(JaxWorkload.place_starts): no step of the warmup or the timed windows copies a start to the device."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "jax"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_engine.contract import RunSpec  # noqa: E402
from bench_engine.data import load_dataset  # noqa: E402
from bench_engine.harness import Measurements, run_harness  # noqa: E402

pytest.importorskip("jax")
pytest.importorskip("flax")


@pytest.mark.parametrize(("mode", "batch", "steps", "options"),
                         [("infer", 4, 6, {}), ("train", 8, 4, {"steps_per_dispatch": 2}), ("train", 16, 3, {"steps_per_dispatch": 1})])
def test_no_start_is_placed_inside_a_step(make_spec: Any, mode: str, batch: int, steps: int, options: dict[str, Any]) -> None:
    from bench_jax.engine import JaxEngine

    doc = make_spec("jax", mode=mode, batch=batch, steps_per_epoch=steps, epochs=2, options=options)
    spec = RunSpec.from_json(doc)
    engine = JaxEngine()
    engine.environment(spec)
    data = load_dataset(doc["parity"]["dataset"]["path"], doc["parity"]["dataset"]["sha256"])
    workload = engine.prepare(spec, data)
    placed = set(workload._starts)
    assert placed, "prepare placed no start"
    late: list[Any] = []
    placer = workload._on_device
    workload._on_device = lambda value: late.append(value) or placer(value)  # type: ignore[method-assign]
    run_harness(workload, spec.schedule, data.samples, Measurements())
    assert late == [] and set(workload._starts) == placed


def test_a_start_missed_by_the_plan_would_be_placed_in_the_step(make_spec: Any) -> None:
    """The check above can fail: with the placing skipped, the steps place their starts themselves."""
    from bench_jax.engine import JaxEngine
    from bench_jax.workload import JaxWorkload

    doc = make_spec("jax", mode="infer", batch=4, steps_per_epoch=6)
    spec = RunSpec.from_json(doc)
    engine = JaxEngine()
    engine.environment(spec)
    data = load_dataset(doc["parity"]["dataset"]["path"], doc["parity"]["dataset"]["sha256"])
    original = JaxWorkload.place_starts
    JaxWorkload.place_starts = lambda self, plan, samples: 0  # type: ignore[method-assign]
    try:
        workload = engine.prepare(spec, data)
    finally:
        JaxWorkload.place_starts = original  # type: ignore[method-assign]
    before = len(workload._starts)
    run_harness(workload, spec.schedule, data.samples, Measurements())
    assert len(workload._starts) > before
