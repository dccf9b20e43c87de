"""The typed engine contract reads and writes the schema-checked documents unchanged, and merges ranks."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bench_engine.api import Engine, StepBatch, Workload
from bench_engine.contract import EngineResult, ResultMeasurements, RunSpec, Window, thin
from bench_engine.main import execute
from bench_engine.report import EnvironmentFacts, PrecisionReport, Readback
from orchestrator.judge.parity import expected_samples
from orchestrator.schemas import validate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "example-run-spec.json"


def _spec_variants() -> list[dict[str, Any]]:
    plain = json.loads(FIXTURE.read_text())
    full = copy.deepcopy(plain)
    full["parity"]["init"] = {"mode": "shared", "file": "init.safetensors", "sha256": "a" * 64, "format": "bench-init-v1"}
    full["parity"]["batch"].update(drop_last=False)
    full["measurement"].update(stall_s=120, setup_stall_s=600)
    full["engine_options"] = {"compile": True, "steps_per_call": 4}
    bare = copy.deepcopy(plain)
    del bare["parity"]["dataset"]["synthetic"]
    bare["expected"]["trainable_parameters"] = None
    return [plain, full, bare]


@pytest.mark.parametrize("doc", _spec_variants(), ids=["fixture", "optional-fields", "no-optional-fields"])
def test_run_spec_round_trips(doc: dict[str, Any]) -> None:
    validate(doc, "run-spec")
    spec = RunSpec.from_json(doc)
    assert spec.to_json() == doc
    assert spec.parity.batch.global_ == doc["parity"]["batch"]["global"] and spec.parity.input.hwc == (32, 32, 3)
    assert spec.parity.expected_samples() == expected_samples(doc)


def test_expected_samples_counts_a_kept_partial_batch() -> None:
    doc = json.loads(FIXTURE.read_text())
    doc["parity"]["dataset"]["samples"] = 100
    doc["parity"]["batch"].update({"global": 32, "drop_last": False})
    doc["parity"].update(steps_per_epoch=4, epochs=2)
    assert RunSpec.from_json(doc).parity.expected_samples() == 200 == expected_samples(doc)


class _Loop(Workload):
    def __init__(self) -> None:
        super().__init__(trainable_parameters=1, precision=PrecisionReport("fp32", "float32", "float32", False, False),
                         data_placement="device")

    def step(self, batch: StepBatch) -> None:
        pass

    def sync(self) -> None:
        pass


class _Engine(Engine):
    name, framework = "loop", "none"

    def __init__(self) -> None:
        self.specs: list[Any] = []

    def environment(self, spec: RunSpec) -> EnvironmentFacts:
        return EnvironmentFacts(framework_version="0", device_kind="cpu", devices=("cpu",))

    def prepare(self, spec: RunSpec, data: Any) -> Workload:
        self.specs.append(spec)
        workload, parity = _Loop(), spec.parity
        workload.readback = Readback(mode=parity.mode, arch=parity.arch, num_classes=parity.num_classes,
                                     input_shape=tuple(int(d) for d in data.images.shape[1:]), param_dtypes=("float32",))
        return workload


def test_engine_result_round_trips(make_spec: Any) -> None:
    for doc in (make_spec("loop", batch=32, steps_per_epoch=3, warmup=1), make_spec("loop", mode="infer", batch=8, steps_per_epoch=6)):
        engine = _Engine()
        built, code = execute(engine, RunSpec.from_json(doc))
        assert code == 0 and isinstance(built, EngineResult)
        assert [type(s) for s in engine.specs] == [RunSpec] and engine.specs[0].to_json() == doc  # prepare got the typed spec
        document = built.to_json()
        validate(document, "engine-result")
        result = EngineResult.from_json(document)
        assert result.to_json() == document
        assert result.measurements is not None and result.measurements.steady == document["measurements"]["steady"]
        assert result.measurements.latency_ms == document["measurements"].get("latency_ms")
    failed = {"schema_version": 1, "run_id": "r", "engine": "x", "status": "failed", "environment": {"devices": []},
              "failure": {"kind": "crash", "message": "boom"}}
    assert EngineResult.from_json(failed).to_json() == failed


def _rank(windows: list[tuple[int, int, float]], setup: float, peak: int | None,
          block_losses: tuple[float, ...] = ()) -> EngineResult:
    measured = ResultMeasurements(setup_s=setup, warmup_s=setup * 2, warmup_steps=1, steady={}, windows=tuple(Window(*w) for w in windows),
                                  epochs=({"epoch": 1, "steps": 3, "samples": 48, "time_s": sum(w[2] for w in windows)},),
                                  peak_memory_bytes=peak, block_losses=block_losses)
    return EngineResult(1, "r", "x", "ok", {"devices": []}, {"steps": 3, "samples": 48, "epochs": 1, "batch_global": 16, "world_size": 2},
                        measured, extra={"_worker": {"rank": 0}})


def test_merge_keeps_the_slowest_rank_and_every_rank_apart() -> None:
    merged = EngineResult.merge([_rank([(1, 16, 1.0), (2, 32, 2.0)], 1.0, 10), _rank([(1, 16, 1.5), (2, 32, 1.0)], 3.0, None)],
                                offsets=[0.5, 0.0], rank_ids=[0, 1])
    m = merged.measurements
    assert m is not None and merged.extra == {}
    assert list(m.windows) == [(1, 16, 1.5), (2, 32, 2.0)] and m.steady["time_s"] == 3.5
    assert m.setup_s == 3.0 and m.warmup_s == 6.0 and m.peak_memory_bytes == 10 and m.epochs[0]["time_s"] == 3.0
    assert [(w["rank"], w["setup_s"], w["steady_time_s"]) for w in m.workers or ()] == [(0, 1.5, 3.0), (1, 3.0, 2.5)]
    with pytest.raises(RuntimeError, match="different numbers of windows"):
        EngineResult.merge([_rank([(1, 16, 1.0)], 1.0, 1), _rank([(1, 16, 1.0), (1, 16, 1.0)], 1.0, 1)], [0, 0], [0, 1])
    with pytest.raises(RuntimeError, match="disagree on a timing window"):
        EngineResult.merge([_rank([(1, 16, 1.0)], 1.0, 1), _rank([(1, 8, 1.0)], 1.0, 1)], [0, 0], [0, 1])


def test_merge_averages_the_block_losses_of_the_ranks() -> None:
    ranks = [_rank([(1, 16, 1.0), (2, 32, 2.0)], 1.0, 1, (2.0, 1.0, 0.5)), _rank([(1, 16, 1.0), (2, 32, 2.0)], 1.0, 1, (4.0, 3.0, 0.5))]
    merged = EngineResult.merge(ranks, [0, 0], [0, 1]).measurements
    assert merged is not None and merged.block_losses == (3.0, 2.0, 0.5)
    assert merged.to_json()["block_losses"] == [3.0, 2.0, 0.5] and ResultMeasurements.from_json(merged.to_json()) == merged
    with pytest.raises(RuntimeError, match="different numbers of block losses"):
        EngineResult.merge([ranks[0], _rank([(1, 16, 1.0), (2, 32, 2.0)], 1.0, 1, (4.0,))], [0, 0], [0, 1])


def test_thinning_keeps_evenly_spaced_windows() -> None:
    assert thin(list(range(10)), 4) == [0, 2, 5, 7] and thin([1, 2], 4) == [1, 2]
