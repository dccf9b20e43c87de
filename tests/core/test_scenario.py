"""Scenario loading: schema, semantic rules, overrides, smoke, matrix expansion."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_engine.schedule import steps_per_epoch
from orchestrator.errors import BadInput
from orchestrator.scenario import expand, load_scenario
from orchestrator.scenario.matrix import build_spec
from orchestrator.schemas import validate

SEED = Path(__file__).resolve().parents[2] / "scenarios" / "cifar_resnet50.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def seed_text() -> str:
    return SEED.read_text()


def test_seed_scenario_is_the_reference_workload():
    scenario = load_scenario(str(SEED))
    w = scenario.workload
    assert (w.model.arch, w.model.num_classes) == ("resnet50_v1.5", 10)
    assert w.input.hwc == (32, 32, 3)
    assert w.dataset.samples == 50000 and w.batch.size == 128 and w.epochs == 2
    assert w.optimizer.momentum == 0.9 and w.loss == "cross_entropy"
    assert scenario.matrix.precisions == ("fp32", "bf16")
    assert set(scenario.matrix.engines) == {"pytorch", "tensorflow", "jax"}
    plans = expand(scenario)
    assert len(plans) == 6 and {p.path for p in plans} == {"optimized"}


def test_bundled_scenario_by_name():
    assert load_scenario("cifar_resnet50").name == "cifar_resnet50"


def test_smoke_shrinks_the_same_scenario():
    scenario = load_scenario(str(SEED), smoke=True)
    assert scenario.smoke
    assert scenario.workload.dataset.samples < 1000 and scenario.workload.epochs == 1
    assert scenario.workload.model.arch == "resnet50_v1.5"


def test_set_overrides_and_shorthand():
    scenario = load_scenario(str(SEED), ["workload.batch.size=64", "epochs=3", "matrix.precisions=[bf16]"])
    assert scenario.workload.batch.size == 64 and scenario.workload.epochs == 3
    assert scenario.matrix.precisions == ("bf16",)
    assert scenario.overrides == (("workload.batch.size", 64), ("epochs", 3), ("matrix.precisions", ["bf16"]))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("batch: {size: 128, drop_last: true}", "batch: {size: 0, drop_last: true}"), "workload.batch.size"),
        (("epochs: 2", "epochs: -1"), "workload.epochs"),
        (("epochs: 2", "epochs: two"), "workload.epochs"),
        (("engines: [pytorch, tensorflow, jax]", "engines: [pytorch, caffe]"), "matrix.engines.1: unknown engine 'caffe'"),
        (("precisions: [fp32, bf16]", "precisions: [fp32, int3]"), "matrix.precisions.1"),
        (("  seed: 0", "  seed: 0\n  colour: blue"), "unknown field(s) colour"),
        (("arch: resnet50_v1.5", "arch: resnet9000"), "workload.model.arch: unknown model"),
        (("    options: {compile: auto, cuda_graphs: auto, channels_last: auto}", "    batch: {size: 64}"), "engines.pytorch.batch: 'batch' is a parity field"),
        (("    options: {compile: auto, cuda_graphs: auto, channels_last: auto}", "    options: {precision: fp16}"), "'precision' is a parity field"),
        (("    options: {compile: auto, cuda_graphs: auto, channels_last: auto}", "    options: {turbo: true}"),
         "engines.pytorch.options.turbo: not an option"),
        (("samples: 50000", "samples: 100"), "exceeds workload.dataset.samples"),
    ],
)
def test_bad_scenarios_name_the_field(tmp_path, edit, message):
    old, new = edit
    text = seed_text()
    assert old in text
    with pytest.raises(BadInput) as info:
        load_scenario(str(write(tmp_path, text.replace(old, new, 1))))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_schema_error_reports_the_line(tmp_path):
    text = seed_text().replace("epochs: 2", "epochs: 0")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.strip().startswith("epochs: 0"))
    with pytest.raises(BadInput, match=rf"s\.yaml:{line}: workload\.epochs"):
        load_scenario(str(write(tmp_path, text)))


def test_malformed_yaml_reports_the_line(tmp_path):
    path = write(tmp_path, "schema_version: 1\nname: x\nworkload: {mode: train\nmatrix: []\n")
    with pytest.raises(BadInput, match=r"s\.yaml:\d+: malformed YAML"):
        load_scenario(str(path))


def test_duplicate_keys_are_refused(tmp_path):
    with pytest.raises(BadInput, match="duplicate key 'name'"):
        load_scenario(str(write(tmp_path, seed_text() + "\nname: again\n")))


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(BadInput, match="scenario file not found"):
        load_scenario(str(tmp_path / "nope.yaml"))
    with pytest.raises(BadInput, match="is a folder"):
        load_scenario(str(tmp_path))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(BadInput, match="cannot read"):
        load_scenario(str(binary))


def test_bad_set_values():
    with pytest.raises(BadInput, match="expected key=value"):
        load_scenario(str(SEED), ["workload.batch.size"])
    with pytest.raises(BadInput, match=r"workload\.batch\.size"):
        load_scenario(str(SEED), ["workload.batch.size=-4"])


def test_cli_subsets_must_be_in_the_matrix():
    scenario = load_scenario(str(SEED))
    assert [p.engine for p in expand(scenario, engines=["jax"])] == ["jax", "jax"]
    with pytest.raises(BadInput, match="--engines: mxnet not in"):
        expand(scenario, engines=["mxnet"])


def test_repeats_are_outermost_and_ids_unique():
    plans = expand(load_scenario(str(SEED)), repeats=3)
    assert len(plans) == 18 and len({p.run_id for p in plans}) == 18
    assert [p.repeat for p in plans[:6]] == [1] * 6


def test_unsupported_precision_is_a_skipped_plan():
    scenario = load_scenario(str(SEED), ["matrix.precisions=[fp16]"])
    skipped = {p.engine: p.skip_reason for p in expand(scenario)}
    assert skipped["jax"] and "fp16" in skipped["jax"]
    assert skipped["pytorch"] is None


def test_steps_per_epoch_drop_last():
    assert steps_per_epoch(50000, 128, True) == 390
    assert steps_per_epoch(50000, 128, False) == 391


def test_built_spec_is_schema_valid(smoke_split):
    scenario = load_scenario(str(SEED), smoke=True)
    plan = expand(scenario)[0]
    spec = build_spec(scenario, plan, smoke_split, str(smoke_split.path), "cpu").to_json()
    validate(spec, "run-spec")
    assert spec["parity"]["batch"]["global"] == 32
    assert spec["parity"]["total_steps"] == smoke_split.samples // 32
    assert spec["expected"]["trainable_parameters"] == 23528522
    assert spec["engine_options"] == {"compile": "auto", "cuda_graphs": "auto", "channels_last": "auto"}


FAKE_SCENARIO = str(Path(__file__).resolve().parents[1] / "fixtures" / "fake_scenario.yaml")


def test_validate_checks_every_plan_not_only_the_first(fake_engines: None) -> None:
    # batch 16: 8 steps, 3 warmup is fine; batch 64: 2 steps, all warmup -> refused before anything runs
    with pytest.raises(BadInput, match=r"workload\.warmup_steps: 3 warmup steps leave none of the 2 steps of batch 64"):
        load_scenario(FAKE_SCENARIO, ["warmup_steps=3", "matrix.batch_sizes=[16, 64]"])
    load_scenario(FAKE_SCENARIO, ["warmup_steps=3", "matrix.batch_sizes=[16, 32]"])


def test_check_plans_builds_every_spec_before_the_first_run(fake_engines: None) -> None:
    from types import SimpleNamespace

    from orchestrator.scenario.matrix import check_plans

    scenario = load_scenario(FAKE_SCENARIO, ["warmup_steps=3", "matrix.batch_sizes=[16, 32]"])
    split = SimpleNamespace(name="tiny", path=Path("/data"), sha256="a" * 64, samples=64, split="train", synthetic=True)
    check_plans(scenario, expand(scenario), split, "cpu")
    small = SimpleNamespace(**{**vars(split), "samples": 40})  # the real split is smaller than the scenario said
    with pytest.raises(BadInput, match=r"run fake-fp32-optimized-b32-d1-r1: workload\.warmup_steps"):
        check_plans(scenario, expand(scenario), small, "cpu")


def test_adam_and_reference_are_validated(fake_engines: None) -> None:
    scenario = load_scenario(FAKE_SCENARIO, ["optimizer={name: adam, lr: 0.001}", "matrix.reference=fake2"])
    from orchestrator.scenario.matrix import reference_engine

    assert scenario.workload.optimizer.to_json() == {"name": "adam", "lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-8,
                                                               "weight_decay": 0.0}
    assert reference_engine(scenario) == "fake2"
    with pytest.raises(BadInput, match="momentum"):
        load_scenario(FAKE_SCENARIO, ["optimizer={name: adam, lr: 0.001, momentum: 0.9}"])
    with pytest.raises(BadInput, match=r"matrix\.reference"):
        load_scenario(FAKE_SCENARIO, ["matrix.reference=jax"])
    with pytest.raises(BadInput, match=r"workload\.init"):
        load_scenario(FAKE_SCENARIO, ["init=shared", "model.arch=tresnet_m"])


def test_a_field_of_several_forms_says_why_each_refuses(tmp_path):
    """oneOf/anyOf: jsonschema's own message ("not valid under any of the given schemas") names no reason."""
    text = seed_text() + "runtime: {slurm: {gpus: many}}\n"
    with pytest.raises(BadInput) as info:
        load_scenario(str(write(tmp_path, text)))
    message = str(info.value)
    assert "runtime.slurm.gpus: 'many' matches none of its allowed forms" in message
    assert "'many' is not of type 'integer'" in message and "'auto' was expected" in message
    assert "any of the given schemas" not in message
