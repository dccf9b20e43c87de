"""The typed engine contract reads and writes the schema-checked documents unchanged, and merges ranks."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench_engine.api import Engine, StepBatch, Workload
from bench_engine.contract import EngineResult, ResultMeasurements, RunSpec, Window, thin
from bench_engine.main import execute
from bench_engine.report import EnvironmentFacts, PrecisionReport, Readback
from orchestrator.judge import parity
from orchestrator.schemas import validate


def expected_samples(doc: dict[str, Any]) -> int:
    """What the orchestrator's parity check expects of the spec document ``doc``."""
    return parity.expected_samples(RunSpec.from_json(doc))


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


def test_merge_keeps_the_tightest_allocator_limit_and_the_limit_round_trips() -> None:
    """A data-parallel run's memory limit is its smallest device's; a result without one writes none."""
    ranks = [_rank([(1, 16, 1.0)], 1.0, 5), _rank([(1, 16, 1.0)], 1.0, 7), _rank([(1, 16, 1.0)], 1.0, 6)]
    limits = [2**30, 3 * 2**29, None]
    ranks = [replace(r, measurements=replace(r.measurements, memory_limit_bytes=lim)) for r, lim in zip(ranks, limits, strict=True)]
    merged = EngineResult.merge(ranks, [0, 0, 0], [0, 1, 2]).measurements
    assert merged is not None and merged.memory_limit_bytes == 2**30 and merged.peak_memory_bytes == 7
    assert merged.to_json()["memory_limit_bytes"] == 2**30 and ResultMeasurements.from_json(merged.to_json()) == merged
    assert "memory_limit_bytes" not in ranks[2].measurements.to_json()


def test_thinning_keeps_evenly_spaced_windows() -> None:
    assert thin(list(range(10)), 4) == [0, 2, 5, 7] and thin([1, 2], 4) == [1, 2]


def test_a_built_result_of_typed_records_is_schema_valid_and_round_trips(make_spec: Any) -> None:
    """Work, Readback, PrecisionReport, Switch, Environment and Failure make the documented blocks:
    the built EngineResult validates against the result schema and reads back unchanged."""
    from bench_engine.report import (
        Environment,
        Failure,
        InitReadback,
        LossReadback,
        Observed,
        OptimizerReadback,
        PrecisionReport,
        Readback,
        Switch,
        Work,
        as_json,
    )
    from bench_engine.weights import WeightChange

    readback = Readback(mode="train", arch="resnet50_v1.5", num_classes=10, input_shape=(32, 32, 3), param_dtypes=("float32",),
                        observed=Observed("bfloat16", "float32", "bfloat16"),
                        optimizer=OptimizerReadback("adam", "x.Adam", 0.001, 0.0, betas=(0.9, 0.999), eps=1e-8, fused=True),
                        loss=LossReadback("cross_entropy", "x.CE", "mean", 0.0), init=InitReadback("shared", "a" * 64),
                        steps_per_dispatch=1)
    work = Work.of(readback, trainable_parameters=5, dataset_sha256="b" * 64, dataset_samples=96, batch_per_device=32,
                   batch_global=32, world_size=1, epochs=1, steps=3, samples=96, data_placement="device",
                   precision=PrecisionReport("bf16", "bfloat16", "float32", False, False, loss_scaling=False),
                   optimizations={"compile": Switch(False, "eager")}, weight_change=WeightChange(0.5, 0.01, 5))
    doc = work.to_json()
    assert doc["optimizer"]["class"] == "x.Adam" and doc["optimizer"]["betas"] == [0.9, 0.999] and "capturable" not in doc["optimizer"]
    assert doc["optimizations"] == {"compile": {"applied": False, "detail": "eager"}} and doc["input_shape"] == [32, 32, 3]
    assert "drop_last" not in doc and doc["weight_change"] == {"l2": 0.5, "relative": 0.01, "values": 5}
    assert list(doc)[:3] == ["mode", "arch", "num_classes"] and list(doc)[-1] == "weight_change"
    env = as_json(Environment("X", "1.0", "3.11", "1.0.0", device_kind="cpu", devices=("cpu",)))
    assert "extra" not in env and env["devices"] == ["cpu"]
    built = EngineResult(1, "r", "x", "failed", env, doc, failure=as_json(Failure("crash", "boom")))
    document = built.to_json()
    validate(document, "engine-result")
    assert EngineResult.from_json(document) == built and document["failure"] == {"kind": "crash", "message": "boom"}
    inference = Work.of(Readback(mode="infer"), precision=PrecisionReport("fp32", "float32", "float32", False, False)).to_json()
    assert inference["optimizer"] is None and inference["loss"] is None and "init" not in inference  # as the schema reads them


def test_the_entrypoint_parses_the_spec_once_into_a_run_spec(tmp_path: Path) -> None:
    """read_command_line gives a RunSpec, its shared initial-weights file made absolute; a spec missing a field is refused."""
    from bench_engine.main import read_command_line

    doc = json.loads(FIXTURE.read_text())
    doc["parity"]["init"] = {"mode": "shared", "file": "init.safetensors", "sha256": "a" * 64, "format": "bench-init-v1"}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(doc))
    _, spec = read_command_line("t", ["--spec", str(spec_file), "--result", str(tmp_path / "r.json")])
    assert isinstance(spec, RunSpec) and spec.init_file() == tmp_path.resolve() / "init.safetensors"
    assert spec.parity.init is not None and spec.parity.init["file"] == str(tmp_path.resolve() / "init.safetensors")
    assert spec.schedule == (32, 6, 1, 2, 1)  # per_device, steps_per_epoch, epochs, warmup_steps, window_steps
    del doc["parity"]["seed"]
    spec_file.write_text(json.dumps(doc))
    assert read_command_line("t", ["--spec", str(spec_file), "--result", str(tmp_path / "r.json")])[1] is None


def test_capped_measurements_keep_the_totals_of_every_window() -> None:
    windows = tuple(Window(1, 16, 0.5) for _ in range(10))
    measured = ResultMeasurements(1.0, 0.1, 1, {"steps": 10, "samples": 160, "time_s": 5.0, "throughput": 32.0}, windows=windows)
    capped = measured.capped(4)
    assert len(capped.windows) == 4 and capped.steady == measured.steady and measured.capped(20) == measured


def test_setup_parts_round_trip_and_the_schema_holds_them_to_their_form() -> None:
    """measurements.setup_parts: the four parts of setup_s, kept through a round trip; a missing, negative or unknown
    part is refused by the result schema."""
    from bench_engine.report import Environment, Failure, as_json
    from orchestrator.errors import BadInput
    from orchestrator.schemas import SchemaError

    parts = {"before_s": 0.5, "environment_s": 2.0, "dataset_s": 3.0, "prepare_s": 4.5}
    steady = {"steps": 0, "samples": 0, "time_s": 0.0, "throughput": None}
    measured = ResultMeasurements(setup_s=10.0, warmup_s=1.0, warmup_steps=1, steady=steady, setup_parts=parts)
    env = as_json(Environment("X", "1.0", "3.11", "1.0.0", device_kind="cpu", devices=("cpu",)))
    doc = EngineResult(1, "r", "x", "failed", env, None, measured, failure=as_json(Failure("crash", "boom"))).to_json()
    validate(doc, "engine-result")
    assert doc["measurements"]["setup_parts"] == parts
    assert EngineResult.from_json(doc).measurements == measured
    assert "setup_parts" not in ResultMeasurements(1.0, 0.0, 0, {}).to_json()
    for bad in ({k: v for k, v in parts.items() if k != "dataset_s"}, {**parts, "dataset_s": -1.0}, {**parts, "other_s": 1.0}):
        document = copy.deepcopy(doc)
        document["measurements"]["setup_parts"] = bad
        with pytest.raises((BadInput, SchemaError), match="setup_parts"):
            validate(document, "engine-result")
