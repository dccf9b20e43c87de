"""The scenario's typed parts: each check made on construction fails on bad input (one line naming the field, exit 2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from orchestrator.errors import BadInput
from orchestrator.scenario import load_scenario
from orchestrator.scenario.blocks import ClaimedRatio, Claims, EngineBlock, Matrix, Measurement
from orchestrator.scenario.scenario import Scenario
from orchestrator.scenario.workload import MaxSearch, Optimizer, Workload
from tests.core.cli_helpers import assert_one_line_error, run_cli

SEED = Path(__file__).resolve().parents[2] / "scenarios" / "cifar_resnet50.yaml"
FAKE_SCENARIO = str(Path(__file__).resolve().parents[1] / "fixtures" / "fake_scenario.yaml")


def _refused(sets: list[str], message: str) -> None:
    with pytest.raises(BadInput) as info:
        load_scenario(FAKE_SCENARIO, sets)
    assert message in str(info.value) and str(info.value).startswith(FAKE_SCENARIO) and "\n" not in str(info.value)


def test_a_part_check_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "validate", str(SEED), "--set", "steps=4")
    assert_one_line_error(code, err, "workload.steps: give epochs or steps, not both")


def test_the_parts_are_typed_and_frozen() -> None:
    scenario = load_scenario(str(SEED))
    assert scenario.workload.batch == dataclasses.replace(scenario.workload.batch)
    assert scenario.engine_block("pytorch").options["compile"] == "auto" and scenario.engine_block("jax") == EngineBlock()
    assert scenario.batch_sizes == (128,) and scenario.matrix.reference_engine == "pytorch"
    with pytest.raises(dataclasses.FrozenInstanceError):
        scenario.workload.seed = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        scenario.engine_block("pytorch").options["compile"] = "off"  # type: ignore[index]


def test_workload_reads_back_as_written() -> None:
    workload = load_scenario("tresnet_m").workload
    assert workload.batch.max_search == MaxSearch(0.9, 64, 2048, 16, 3) and workload.init == "framework"
    assert Workload.from_json(workload.to_json()) == workload
    assert "steps" not in workload.to_json() and "samples" in workload.to_json()["dataset"]


def test_workload_length_is_epochs_or_steps_never_both(fake_engines: None) -> None:
    _refused(["steps=4"], "workload.steps: give epochs or steps, not both")
    workload = load_scenario(FAKE_SCENARIO).workload
    with pytest.raises(ValueError, match=r"workload\.steps: give epochs or steps, not both"):
        dataclasses.replace(workload, steps=4)
    with pytest.raises(ValueError, match=r"workload\.epochs: required for mode 'train'"):
        dataclasses.replace(workload, epochs=None)
    with pytest.raises(ValueError, match=r"workload\.steps: give epochs or steps$"):
        dataclasses.replace(workload, mode="infer", epochs=None)
    assert dataclasses.replace(workload, epochs=None, steps=3).length(64, 16) == (1, 3)  # a maximal batch probe's


def test_training_needs_epochs_even_with_steps(fake_engines: None) -> None:
    _refused(["steps=2", "epochs=1"], "give epochs or steps, not both")
    document = load_scenario(FAKE_SCENARIO).document
    workload = {key: value for key, value in document["workload"].items() if key != "epochs"}
    with pytest.raises(BadInput, match=r"s\.yaml: workload\.epochs: required for mode 'train'"):
        Scenario.from_document({**document, "workload": workload}, Path("s.yaml"))


def test_matrix_checks_its_reference_and_engines(fake_engines: None) -> None:
    _refused(["matrix.reference=jax"], "matrix.reference: 'jax' is not one of matrix.engines (fake, fake2)")
    with pytest.raises(ValueError, match=r"matrix\.engines: at least one engine"):
        Matrix((), ("fp32",))
    assert Matrix.from_json({"engines": ["a", "b"], "precisions": ["fp32"], "reference": "b"}).reference_engine == "b"


def test_measurement_values_are_positive(fake_engines: None) -> None:
    assert load_scenario(FAKE_SCENARIO).measurement == Measurement(window_steps=1, timeout_s=60.0)
    for field in ("window_steps", "timeout_s", "max_step_samples", "stall_s", "setup_stall_s"):
        with pytest.raises(ValueError, match=rf"measurement\.{field}: 0 is not positive"):
            Measurement(**{field: 0})


def test_claimed_ratios_are_positive() -> None:
    claims = load_scenario("opennn_seed").claims
    assert claims is not None and claims.ratios and all(isinstance(r, ClaimedRatio) for r in claims.ratios)
    with pytest.raises(ValueError, match=r"claims\.ratios: a / b: claimed ratio 0 is not positive"):
        Claims.from_json({"source": "s", "hardware": "h", "ratios": [{"engine": "a", "vs": "b", "precision": "fp32", "claimed": 0}]})


def test_optimizer_fills_in_its_defaults() -> None:
    assert Optimizer.from_json({"name": "sgd", "lr": 0.1}).to_json() == {"name": "sgd", "lr": 0.1, "momentum": 0.0, "weight_decay": 0.0,
                                                                         "nesterov": False}
    adam = Optimizer.from_json({"name": "adam", "lr": 0.001, "betas": [0.8, 0.9]})
    assert adam.to_json() == {"name": "adam", "lr": 0.001, "betas": [0.8, 0.9], "eps": 1e-8, "weight_decay": 0.0}
