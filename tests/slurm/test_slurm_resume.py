"""``bench scenario resume``: which runs are kept, which run again, where old attempts go (any runtime)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from orchestrator.artifacts import create_artifact, validate_artifact, write_manifest
from orchestrator.artifacts.layout import SCENARIO
from orchestrator.errors import BadInput
from orchestrator.jsonio import write_json
from orchestrator.runtimes import Execution, Runtime, RuntimeFacts
from orchestrator.scenario import RunPlan, load_scenario

REPO = Path(__file__).resolve().parents[2]


class Quiet:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def warn(self, message: str) -> None:
        self.notes.append(message)

    def run_started(self, index, total, plan) -> None: ...
    def engine_line(self, line) -> None: ...
    def run_finished(self, record) -> None: ...


def _record(plan: RunPlan, status: str, reason: str | None, runtime: str = "slurm") -> dict[str, Any]:
    from orchestrator.run.finish import new_record

    info = {"name": runtime, "job_id": "41", "node": "n1"} if runtime == "slurm" else {"name": runtime}
    return new_record(plan, status, reason, info, "2026-01-01T00:00:00.000Z", 1.0).to_json()


@pytest.fixture()
def artifact(tmp_path: Path, data_dir: Path):
    """A smoke artifact with one run of each kind (no engine has run: records and specs only)."""
    from orchestrator.run.execute import prepare_dataset
    from orchestrator.scenario.matrix import build_spec

    scenario = load_scenario("cifar_resnet50", smoke=True)
    art = create_artifact(tmp_path / "results", scenario.name)
    (art.root / SCENARIO).write_text(yaml.safe_dump(scenario.document, sort_keys=False))
    split = prepare_dataset(scenario)

    def run(plan: RunPlan, status: str | None, reason: str | None = None, spec: bool = True, runtime: str = "slurm") -> Path:
        folder = art.run_dir(plan.run_id)
        folder.mkdir(parents=True)
        if spec:
            write_json(folder / "spec.json", build_spec(scenario, plan, split, str(split.path), "cpu").to_json(), "run-spec")
        if status:
            write_json(folder / "run.json", _record(plan, status, reason, runtime), "run-record")
        return folder

    failed = run(RunPlan("pytorch", "bf16", "optimized", 32, 1, 1), "failed", "engine exited with code 1 and wrote no result file")
    (failed / "result.json").write_text('{"truncated": ')  # a broken result: set aside as .rejected
    (failed / "engine.log").write_text("Traceback ...\n")
    run(RunPlan("jax", "fp16", "optimized", 32, 1, 1), "skipped", "engine 'jax' does not support precision fp16", spec=False,
        runtime="none")
    run(RunPlan("jax", "fp32", "optimized", 32, 1, 1), "skipped", "not started: the scenario was interrupted", spec=False, runtime="none")
    run(RunPlan("pytorch", "fp32", "optimized", 32, 1, 1), "ok")  # recorded ok, but its result is gone
    run(RunPlan("jax", "bf16", "optimized", 32, 1, 1), None)  # the process died: a spec, no record
    art.run_dir("pytorch-fp32-optimized-b32-d1-r2").mkdir()  # nothing at all but its name
    write_manifest(art, complete=False)
    return art


def test_plan(artifact) -> None:
    from orchestrator.run.resume import plan_resume

    plan = plan_resume(artifact.root)
    assert plan.scenario.smoke is True and plan.device == "cpu" and plan.runtime == "slurm"
    actions = {r.plan.run_id: (r.keep, r.why) for r in plan.runs}
    assert actions == {
        "pytorch-fp32-optimized-b32-d1-r1": (False, "recorded ok but its result is missing or invalid"),
        "pytorch-bf16-optimized-b32-d1-r1": (False, "failed: engine exited with code 1 and wrote no result file"),
        "jax-fp16-optimized-b32-d1-r1": (True, "skipped: engine 'jax' does not support precision fp16"),
        "jax-fp32-optimized-b32-d1-r1": (False, "skipped: not started: the scenario was interrupted"),
        "jax-bf16-optimized-b32-d1-r1": (False, "no run record"),
        "pytorch-fp32-optimized-b32-d1-r2": (False, "no run record"),
        # the scenario's matrix re-expanded: runs that never got a folder are run too
        "tensorflow-fp32-optimized-b32-d1-r1": (False, "never started"),
        "tensorflow-bf16-optimized-b32-d1-r1": (False, "never started"),
    }
    # expand()'s order: repeat, then the matrix order of engines and precisions
    assert [r.plan.run_id for r in plan.runs] == [
        "pytorch-fp32-optimized-b32-d1-r1", "pytorch-bf16-optimized-b32-d1-r1", "tensorflow-fp32-optimized-b32-d1-r1",
        "tensorflow-bf16-optimized-b32-d1-r1", "jax-fp32-optimized-b32-d1-r1", "jax-bf16-optimized-b32-d1-r1",
        "jax-fp16-optimized-b32-d1-r1", "pytorch-fp32-optimized-b32-d1-r2",
    ]
    assert plan_resume(artifact.root, runtime="local", device="auto").runtime == "local"


class FailingRuntime(Runtime):
    """Stands for any runtime: the engine 'runs' and exits 1 without a result."""

    name = "fake"
    calls: ClassVar[list[str]] = []

    def check(self, engine, settings):
        return RuntimeFacts(self.name)

    def execute(self, engine, paths, settings, timeout_s, sink):
        FailingRuntime.calls.append(paths.run_dir.name)
        paths.log.write_text("fake engine output\n")
        return Execution("exited", 1, None, RuntimeFacts(self.name))


def test_resume_reruns_only_runs_without_a_valid_result(artifact, monkeypatch) -> None:
    import orchestrator.run.execute as execute
    from orchestrator.run.resume import plan_resume, resume

    def choose(engines, requested, settings_for, reporter):
        assert requested == "fake"
        from orchestrator.run.runtime_choice import ChosenRuntime

        return {name: ChosenRuntime(FailingRuntime(), settings_for[name].with_checked(RuntimeFacts("fake"))) for name in engines}

    monkeypatch.setattr(execute, "choose_runtimes", choose)
    FailingRuntime.calls = []
    kept_before = (artifact.run_dir("jax-fp16-optimized-b32-d1-r1") / "run.json").read_text()
    reporter = Quiet()
    outcome = resume(plan_resume(artifact.root, runtime="fake"), {}, reporter)
    assert sorted(FailingRuntime.calls) == sorted(["pytorch-fp32-optimized-b32-d1-r1", "pytorch-bf16-optimized-b32-d1-r1",
                                                   "jax-fp32-optimized-b32-d1-r1", "jax-bf16-optimized-b32-d1-r1",
                                                   "pytorch-fp32-optimized-b32-d1-r2", "tensorflow-fp32-optimized-b32-d1-r1",
                                                   "tensorflow-bf16-optimized-b32-d1-r1"])
    assert (artifact.run_dir("jax-fp16-optimized-b32-d1-r1") / "run.json").read_text() == kept_before
    # old attempts moved aside whole; a broken document renamed so the artifact still validates
    old = artifact.root / "attempts" / "pytorch-bf16-optimized-b32-d1-r1" / "1"
    assert sorted(p.name for p in old.iterdir()) == ["engine.log", "result.json.rejected", "run.json", "spec.json"]
    assert json.loads((old / "run.json").read_text())["status"] == "failed"
    assert (artifact.root / "attempts" / "pytorch-fp32-optimized-b32-d1-r2" / "1").is_dir()
    record = json.loads((artifact.run_dir("pytorch-bf16-optimized-b32-d1-r1") / "run.json").read_text())
    assert record["status"] == "failed" and record["runtime"]["name"] == "fake"
    assert outcome.summary.counts == {"failed": 7, "skipped": 1} and outcome.exit_code == 1
    assert validate_artifact(artifact.root) == []
    manifest = json.loads((artifact.root / "manifest.json").read_text())
    assert manifest["complete"] is True
    assert "attempts/pytorch-bf16-optimized-b32-d1-r1/1/run.json" in {f["path"] for f in manifest["files"]}
    # a second resume numbers the next attempt
    resume(plan_resume(artifact.root, runtime="fake"), {}, reporter)
    assert (artifact.root / "attempts" / "pytorch-bf16-optimized-b32-d1-r1" / "2" / "run.json").is_file()
    assert validate_artifact(artifact.root) == []


def test_not_an_artifact(tmp_path) -> None:
    from orchestrator.run.resume import plan_resume

    with pytest.raises(BadInput, match="not a bench artifact"):
        plan_resume(tmp_path)


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from orchestrator.cli.app import main; main()", *args],
                          capture_output=True, text=True, cwd=REPO, env=dict(os.environ), timeout=120)


def test_cli_dry_run_and_errors(artifact, tmp_path) -> None:
    before = sorted(p.relative_to(artifact.root) for p in artifact.root.rglob("*"))
    proc = _bench("scenario", "resume", str(artifact.root), "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["runtime"] == "slurm" and shown["device"] == "cpu"
    assert [r["action"] for r in shown["runs"]].count("run") == 7
    assert sorted(p.relative_to(artifact.root) for p in artifact.root.rglob("*")) == before  # --dry-run changes nothing
    proc = _bench("scenario", "resume", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "not a bench artifact" in proc.stderr
    proc = _bench("scenario", "resume", str(artifact.root), "--device", "tpu")
    assert proc.returncode == 2 and "--device: 'tpu'" in proc.stderr
