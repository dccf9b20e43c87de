"""Scenario values at the edges: non-finite numbers, integers past 64 bits, maxima, a matrix too large to
expand, names ending in a newline, runtime settings the real submission refuses. Each is refused in one
line (exit 2) naming the field, within the example bound; the value one step inside the bound passes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.scenario import bounds
from tests.reliability.hostile_support import FAKE_SCENARIO, call, fake_engines, save_figures, timed

__all__ = ["fake_engines"]
pytestmark = pytest.mark.usefixtures("fake_engines")
GROUP = "scenario bounds and runtime settings"


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


def _validate(capsys, monkeypatch, *sets: str, command: str = "validate") -> tuple[int, str]:
    args = [arg for item in sets for arg in ("--set", item)]
    extra = ["--dry-run", "--runtime", "local"] if command == "run" else []
    with timed(GROUP):
        code, _, err = call(capsys, monkeypatch, "scenario", command, str(FAKE_SCENARIO), *extra, *args)
    return code, err


REFUSED = [
    ("workload.optimizer.lr=.nan", "workload.optimizer.lr: nan is not a finite number"),
    ("workload.optimizer.lr=.inf", "workload.optimizer.lr: inf is not a finite number"),
    ("workload.optimizer.lr=-.inf", "workload.optimizer.lr: -inf is not a finite number"),
    ("measurement.timeout_s=.nan", "measurement.timeout_s: nan is not a finite number"),
    ("measurement.stall_s=.inf", "measurement.stall_s: inf"),
    ("workload.optimizer.momentum=.nan", "workload.optimizer.momentum: nan"),
    ("measurement.timeout_s=1.0e+300", "measurement.timeout_s: 1e+300 is greater than the maximum"),
    (f"workload.seed={10**300}", "workload.seed: an integer of 301 digits is outside the 64-bit range"),
    (f"workload.seed={2**63}", "workload.seed"),
    ("workload.model.num_classes=1000000000", "workload.model.num_classes: 1000000000 is greater than the maximum of 100000"),
    ("matrix.repeats=100000000", "matrix.repeats: 100000000 is greater than the maximum of 1000"),
    ("workload.epochs=1000000", "workload.epochs"),
    ("workload.batch.size=1048577", "workload.batch.size"),
    ("workload.input.height=100000", "workload.input.height"),
    ("workload.warmup_steps=10000000000", "workload.warmup_steps"),
    ("measurement.max_step_samples=1000000000", "measurement.max_step_samples"),
    ("runtime.slurm.gpus=100000", "runtime.slurm.gpus"),
    ("runtime.slurm.poll_s=.nan", "runtime.slurm.poll_s: nan"),
    ("runtime.docker.cpus=.inf", "runtime.docker.cpus: inf"),
    ("matrix.precisions=[fp32, bf16, fp16, tf32]", None),  # inside: passes (fp16/tf32 skipped by the fakes)
    ('name="x\\n"', "name: 'x\\n' does not match"),
    ('workload.dataset.name="tiny\\n"', "workload.dataset.name"),
    ('runtime.docker.shm_size="8g\\n"', "runtime.docker.shm_size"),
    ("runtime.slurm.partition=\"gpu\\nx\"", "runtime.slurm.partition: 'gpu\\nx' is not partition names"),
    ("runtime.slurm.account=\"a b\"", "runtime.slurm.account"),
    ("runtime.slurm.time=\"1:00\\n#SBATCH --wrap=x\"", "runtime.slurm.time"),
    ("runtime.slurm.sbatch_args=--wrap=id", "runtime.slurm.sbatch_args: '--wrap=id' is set by bench itself"),
    ("runtime.slurm.shared_dir=\"/tmp/a\\nb\"", "runtime.slurm.shared_dir"),
    ("engines.fake.image=\"img\\nx\"", "engines.fake.image"),
]


@pytest.mark.parametrize(("assignment", "needle"), REFUSED)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_each_bound_fires(assignment: str, needle: str | None, command: str, capsys, monkeypatch) -> None:
    code, err = _validate(capsys, monkeypatch, assignment, command=command)
    if needle is None:
        assert code == 0, err
    else:
        assert code == 2 and needle in err, err


INSIDE = ["workload.optimizer.lr=1000", f"workload.seed={2**63 - 1}", "workload.model.num_classes=100000", "matrix.repeats=1000",
          "measurement.timeout_s=2592000", "workload.optimizer.lr=1.0e-12", "name=a.b-c_1", "runtime.slurm.partition=gpu,debug",
          "runtime.slurm.time=1-00:00:00", "runtime.slurm.sbatch_args=--exclusive --mem=4G", "runtime.docker.shm_size=16g",
          "engines.fake.image=registry/x:1"]


@pytest.mark.parametrize("assignment", INSIDE)
def test_values_inside_the_bounds_pass(assignment: str, capsys, monkeypatch) -> None:
    code, err = _validate(capsys, monkeypatch, assignment)
    assert code == 0, err


def test_matrix_size_is_bounded_before_expansion(capsys, monkeypatch) -> None:
    """4 cells x 1000 repeats (4000 runs) pass and answer fast; --repeats past MAX_RUNS is refused, never expanded."""
    with timed(GROUP):
        code, out, err = call(capsys, monkeypatch, "scenario", "validate", str(FAKE_SCENARIO), "--set", "matrix.repeats=1000")
    assert code == 0 and "4000 runs" in out, err
    for command in (["run", "--dry-run", "--runtime", "local"], ["show"]):
        with timed(GROUP):
            code, _, err = call(capsys, monkeypatch, "scenario", *command[:1], str(FAKE_SCENARIO), *command[1:], "--repeats", "100000000")
        assert code == 2 and f"more than the {bounds.MAX_RUNS} one scenario may expand to" in err, err
    with timed(GROUP):
        code, out, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--dry-run", "--runtime", "local",
                              "--repeats", str(bounds.MAX_RUNS // 4))
    assert code == 0 and f"{bounds.MAX_RUNS} runs" in out, err
    with timed(GROUP):
        code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--dry-run", "--runtime", "local",
                            "--repeats", str(bounds.MAX_RUNS // 4 + 1))
    assert code == 2 and "runs (2 engines x 2 precisions x 1025 repeats)" in err, err


def test_a_wide_matrix_in_the_file_is_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    document = yaml.safe_load(FAKE_SCENARIO.read_text())
    document["workload"]["dataset"]["samples"] = 10**6
    document["matrix"].update(batch_sizes=list(range(1, 65)), devices=list(range(1, 65)), repeats=1)
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(document))
    with timed(GROUP):
        code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code == 2 and "matrix: 16384 runs" in err, err


def test_slurm_options_and_environment_checked_by_dry_run(capsys, monkeypatch) -> None:
    base = ["scenario", "run", str(FAKE_SCENARIO), "--dry-run"]
    code, _, err = call(capsys, monkeypatch, *base, "--runtime", "local", "--slurm-partition", "gpu\nx")
    assert code == 2 and "slurm.partition" in err, err
    code, _, err = call(capsys, monkeypatch, *base, "--runtime", "local", "--slurm-partition", "gpu")
    assert code == 0, err
    monkeypatch.setenv("BENCH_SLURM_ACCOUNT", "a\nb")  # every BENCH_* variable is checked before any command (orchestrator.envvars)
    code, _, err = call(capsys, monkeypatch, *base, "--runtime", "local")
    assert code == 2 and "BENCH_SLURM_ACCOUNT" in err, err
    monkeypatch.setattr("orchestrator.runtimes.get_runtime", lambda name: None)  # no cluster here: the settings alone
    code, _, err = call(capsys, monkeypatch, *base, "--runtime", "slurm")
    assert code == 2 and "BENCH_SLURM_ACCOUNT" in err, err


def test_numbers_anywhere_are_checked(tmp_path: Path, capsys, monkeypatch) -> None:
    """A non-finite number in a free-form block (engine options, smoke overrides) is refused too."""
    for block, value in (("engines", {"fake": {"options": {"x": float("nan")}}}), ("smoke", {"workload.optimizer.lr": float("inf")})):
        document = yaml.safe_load(FAKE_SCENARIO.read_text())
        document[block] = value
        path = tmp_path / f"{block}.yaml"
        path.write_text(yaml.safe_dump(document))
        code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
        assert code == 2 and "is not a finite number" in err, err


def test_the_schema_patterns_end_at_the_end_of_input() -> None:
    """No pattern of the scenario schema ends in a bare '$' (which also matches before a final newline)."""
    import json

    from orchestrator.paths import schemas_dir

    text = (schemas_dir() / "scenario.schema.json").read_text()
    patterns = [value for key, value in _items(json.loads(text)) if key == "pattern"]
    assert patterns and all(not p.endswith("$") for p in patterns), patterns


def _items(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _items(value)
    elif isinstance(node, list):
        for value in node:
            yield from _items(value)
