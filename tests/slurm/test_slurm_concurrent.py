"""A matrix through the slurm runtime against fake Slurm commands: submitted up front in interleaved order,
capped by job dependencies, every job state mapped to a recorded outcome, Ctrl-C cancelling every job,
a killed bench's jobs reattached."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.artifacts import create_artifact, validate_artifact
from orchestrator.artifacts.layout import SCENARIO
from orchestrator.engines.registry import EngineInfo
from orchestrator.errors import BadInput
from orchestrator.run.attempt import judge, run_paths
from orchestrator.run.concurrent import in_flight_limit
from orchestrator.run.runtime_choice import ChosenRuntime
from orchestrator.runtimes import PlannedRun, RunPaths, RuntimeFacts, RuntimeSettings
from orchestrator.runtimes.local import LocalRuntime
from orchestrator.runtimes.slurm import SlurmRuntime
from orchestrator.runtimes.slurm_batch import read_job_file
from orchestrator.runtimes.slurm_settings import SlurmSettings, slurm_settings
from orchestrator.scenario import RunPlan, expand, load_scenario

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# The engine each fake job runs: sleeps FAKE_SLEEP_S (from the environment sbatch passes on), then writes a result.
FAKE_ENGINE = """\
import json, os, sys, time
result = sys.argv[sys.argv.index('--result') + 1]
print('fake engine: started', flush=True)
time.sleep(float(os.environ.get('FAKE_SLEEP_S', '0')))
json.dump({'status': 'ok'}, open(result, 'w'))
print('fake engine: done', flush=True)
"""


class Quiet:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.finished: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def warn(self, message: str) -> None:
        self.notes.append(message)

    def run_started(self, index, total, plan) -> None: ...
    def engine_line(self, line) -> None: ...

    def run_finished(self, record) -> None:
        self.finished.append(record.run_id)


@pytest.fixture()
def engine(tmp_path: Path) -> EngineInfo:
    folder = tmp_path / "images" / "fake"
    folder.mkdir(parents=True)
    (folder / "fake_engine.py").write_text(FAKE_ENGINE)
    return EngineInfo(name="fake", framework="Fake", module="fake_engine", framework_module="json", folder=folder, precisions=("fp32",))


def _settings(**slurm) -> RuntimeSettings:
    return RuntimeSettings.from_blocks({"slurm": {"poll_s": 0.1, **slurm}}).with_checked(RuntimeFacts("slurm", interpreter=sys.executable))


@pytest.fixture()
def matrix(tmp_path: Path, data_dir: Path, engine: EngineInfo, monkeypatch: pytest.MonkeyPatch):
    """(run the matrix with these slurm settings and engines/repeats) -> (artifact, outcome); every engine is the fake one."""
    import yaml

    import orchestrator.run.concurrent as concurrent
    from orchestrator.host.gpus import nvml_snapshot
    from orchestrator.run.execute import RunOptions, prepare_dataset, run_plans

    monkeypatch.setattr(concurrent, "get_engine", lambda name: engine)
    made = {}

    def run(engines=("pytorch",), repeats=2, reporter=None, init="framework", **slurm):
        scenario = load_scenario("cifar_resnet50", sets=[f"workload.init={init}"], smoke=True)
        plans = expand(scenario, engines=list(engines), precisions=["fp32"], repeats=repeats)
        art = create_artifact(tmp_path / "results", scenario.name)
        (art.root / SCENARIO).write_text(yaml.safe_dump(scenario.document, sort_keys=False))
        chosen = ChosenRuntime(SlurmRuntime(), _settings(**slurm))
        runtimes = dict.fromkeys(engines, chosen)
        outcome = run_plans(art, scenario, plans, prepare_dataset(scenario), runtimes, RunOptions(device="cpu"), reporter or Quiet(),
                            nvml_snapshot())
        made["artifact"] = art
        return art, outcome, plans

    return run


def _record(art, run_id: str) -> dict:
    return json.loads((art.run_dir(run_id) / "run.json").read_text())


def test_the_matrix_is_submitted_up_front_interleaved(fake_slurm, matrix, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SLEEP_S", "2")
    art, outcome, plans = matrix(engines=("pytorch", "tensorflow"), repeats=2)
    # submission order: repeats outermost, engines alternating within each (a noisy node biases no engine)
    order = [name.split(f"bench-{art.artifact_id}-")[1] for _, name, _ in fake_slurm.submitted()]
    assert order == [p.run_id for p in plans] == ["pytorch-fp32-optimized-b32-d1-r1", "tensorflow-fp32-optimized-b32-d1-r1",
                                                  "pytorch-fp32-optimized-b32-d1-r2", "tensorflow-fp32-optimized-b32-d1-r2"]
    assert all(dependency is None for _, _, dependency in fake_slurm.submitted())  # no cap: no dependency
    records = [_record(art, p.run_id) for p in plans]
    starts = sorted(r["runtime"]["job_start"] for r in records)
    ends = sorted(r["runtime"]["job_end"] for r in records)
    assert starts[-1] <= ends[0]  # every job had started before the first one ended
    for plan, record in zip(plans, records, strict=True):
        runtime = record["runtime"]
        assert runtime["node"] == "fake" and runtime["scheduler_state"] == "COMPLETED" and runtime["node_type"] == "partitions=debug"
        assert read_job_file(art.run_dir(plan.run_id)).job_id == runtime["job_id"]
    assert validate_artifact(art.root) == [] and not outcome.interrupted
    # one squeue call answers for every job followed; scontrol is asked about each job only as it ends
    calls = fake_slurm.calls()
    assert any("," in call for call in calls if call.startswith("squeue -h -t all -j "))
    for job, _, _ in fake_slurm.submitted():
        assert sum(call == f"scontrol show job -o {job}" for call in calls) <= 3, [c for c in calls if job in c]


def test_the_cap_chains_the_jobs(fake_slurm, matrix, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SLEEP_S", "1.2")
    art, _, plans = matrix(repeats=3, max_concurrent=1)
    jobs = fake_slurm.submitted()
    assert [dependency for _, _, dependency in jobs] == [None, f"afterany:{jobs[0][0]}", f"afterany:{jobs[1][0]}"]
    times = [fake_slurm.times(job) for job, _, _ in jobs]
    assert times[0][1] <= times[1][0] and times[1][1] <= times[2][0]  # one at a time
    assert all(_record(art, p.run_id)["runtime"]["scheduler_state"] == "COMPLETED" for p in plans)


def test_a_cap_of_two_lets_two_run(fake_slurm, matrix, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SLEEP_S", "0.5")
    matrix(repeats=3, max_concurrent=2)
    jobs = fake_slurm.submitted()
    assert [dependency for _, _, dependency in jobs] == [None, None, f"afterany:{jobs[0][0]}"]


def test_ctrl_c_cancels_every_job(fake_slurm, data_dir, tmp_path) -> None:
    """Ctrl-C while one job runs and two wait on the cap: all three cancelled and recorded interrupted.

    bench runs as `python -m orchestrator` in a process of its own and gets a real SIGINT: in-process, the signal
    would meet whatever handlers earlier tests of the session left (an in-process CLI test ends with SIGINT ignored)."""
    out, log = tmp_path / "results", tmp_path / "bench.log"
    env = {**os.environ, "BENCH_ENGINE_PATH": os.pathsep.join(str(FIXTURES / name) for name in ("fake_engine", "fake_engine2")),
           "BENCH_SLURM_POLL_S": "0.1"}
    argv = [sys.executable, "-m", "orchestrator", "scenario", "run", str(FIXTURES / "fake_scenario.yaml"), "--engines", "fake",
            "--precisions", "fp32", "--repeats", "3", "--runtime", "slurm", "--slurm-max-concurrent", "1",
            "--set", "engines.fake.options.behaviour=hang", "--out", str(out)]
    first = "fake-fp32-optimized-b16-d1-r1"
    clock = time.monotonic()
    with log.open("w") as sink:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
    try:
        # all three submitted (the second and third chained on the cap), the first's engine running and bench seeing it run
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            submitted, engine_logs = fake_slurm.submitted(), list(out.glob(f"fake_tiny/*/runs/{first}/engine.log"))
            if (len(submitted) == 3 and f"{first}: slurm: job {submitted[0][0]} running on" in log.read_text()
                    and engine_logs and "hanging" in engine_logs[0].read_text(errors="replace")):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the first job never ran (bench {'exited ' + str(proc.returncode) if proc.poll() is not None else 'still running'}):\n"
                                 + log.read_text()[-3000:])
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text()
    assert time.monotonic() - clock < 40 and code == 130, output[-3000:]
    (root,) = out.glob("fake_tiny/*")
    jobs = [job for job, _, _ in fake_slurm.submitted()]
    assert [dependency for _, _, dependency in fake_slurm.submitted()] == [None, f"afterany:{jobs[0]}", f"afterany:{jobs[1]}"]
    assert len(jobs) == 3 and all(f"scancel {job}" in fake_slurm.calls() for job in jobs), fake_slurm.calls()
    assert fake_slurm.running_jobs() == []
    for repeat, job in enumerate(jobs, start=1):
        record = json.loads((root / "runs" / f"fake-fp32-optimized-b16-d1-r{repeat}" / "run.json").read_text())
        assert record["status"] == "interrupted" and f"Slurm job {job} cancelled" in record["reason"], record
        assert record["runtime"]["job_id"] == job and record["runtime"]["scheduler_state"] == "CANCELLED", record
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["complete"] is False and "in_flight" not in manifest
    assert validate_artifact(root) == []


def test_ctrl_c_while_submitting(fake_slurm, matrix, monkeypatch) -> None:
    """Ctrl-C right after the second job is submitted: both submitted jobs cancelled (interrupted, or skipped when it
    came before the run was handed over), the third never submitted (skipped)."""
    monkeypatch.setenv("FAKE_SLEEP_S", "60")

    class Interrupting(Quiet):
        def note(self, message: str) -> None:
            super().note(message)
            if message.startswith("slurm: submitted job 101"):
                raise KeyboardInterrupt

    art, outcome, plans = matrix(repeats=3, reporter=Interrupting())
    assert outcome.interrupted and [job for job, _, _ in fake_slurm.submitted()] == ["100", "101"]
    assert "scancel 100" in fake_slurm.calls() and "scancel 101" in fake_slurm.calls() and fake_slurm.running_jobs() == []
    statuses = [_record(art, p.run_id)["status"] for p in plans]
    assert statuses == ["interrupted", "skipped", "skipped"], statuses
    assert _record(art, plans[2].run_id)["reason"] == "not started: the scenario was interrupted"
    assert validate_artifact(art.root) == []


def test_every_spec_and_the_shared_weights_before_the_first_job(fake_slurm, matrix, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SLEEP_S", "0")
    seen = {}
    submit = SlurmRuntime.submit

    def checking(self, runs, sink):
        root = runs[0].paths.run_dir.parent.parent
        seen["specs"] = all(run.paths.spec.is_file() for run in runs)
        seen["init"] = any((root / "init").glob("*.safetensors"))
        seen["sealed"] = any(f["path"].startswith("init/") for f in json.loads((root / "manifest.json").read_text())["files"])
        return submit(self, runs, sink)

    monkeypatch.setattr(SlurmRuntime, "submit", checking)
    matrix(repeats=2, init="shared")
    assert seen == {"specs": True, "init": True, "sealed": True}


@pytest.mark.parametrize(("state", "outcome", "words"), [
    ("PREEMPTED", "error", "ended PREEMPTED without an engine result"),
    ("NODE_FAIL", "error", "ended NODE_FAIL without an engine result"),
    ("BOOT_FAIL", "error", "ended BOOT_FAIL"),
    ("OUT_OF_MEMORY", "error", "ended OUT_OF_MEMORY"),
    ("CANCELLED", "error", "ended CANCELLED without an engine result"),  # scancel by someone else
    ("TIMEOUT", "timeout", "ended TIMEOUT: it reached its time limit"),
    ("GONE", "error", "vanished from the controller"),
])
def test_every_end_of_a_job_is_a_recorded_outcome(fake_slurm, engine, tmp_path, monkeypatch, state, outcome, words) -> None:
    monkeypatch.setenv("FAKE_SLEEP_S", "60")
    paths = _paths(tmp_path)

    def sink(line: str) -> None:
        if line == "fake engine: started":
            fake_slurm.end_as("100", state)

    clock = time.monotonic()
    execution = SlurmRuntime().execute(engine, paths, _settings(), 600, sink)
    assert time.monotonic() - clock < 30  # never a hang
    assert execution.outcome == outcome and words in execution.detail, execution
    assert judge_status(paths, execution) == ("timeout" if state == "TIMEOUT" else "failed")


def judge_status(paths: RunPaths, execution) -> str:
    from bench_engine.contract import RunSpec
    from tests.conftest import spec_doc

    return judge(RunSpec.from_json(spec_doc()), execution, paths.result).status


def _paths(tmp_path: Path) -> RunPaths:
    run = tmp_path / "results" / "scn" / "20260101T000000Z-abcdef" / "runs" / "fake-fp32-optimized-b32-d1-r1"
    run.mkdir(parents=True)
    (run / "spec.json").write_text(json.dumps({"device": "cpu", "parity": {"devices": 1}}))
    return run_paths(run, tmp_path / "data")


def test_a_killed_benchs_job_is_reattached(fake_slurm, engine, tmp_path, monkeypatch) -> None:
    """What resume does for a run whose bench was SIGKILLed: the job of slurm-job.json is followed, not resubmitted."""
    monkeypatch.setenv("FAKE_SLEEP_S", "1")
    paths = _paths(tmp_path)
    settings = _settings()
    assert SlurmRuntime().submit([PlannedRun(engine, paths, settings, 600)], lambda line: None) == 1
    job = read_job_file(paths.run_dir)
    assert job.job_id == "100" and job.job_name == "bench-20260101T000000Z-abcdef-fake-fp32-optimized-b32-d1-r1"
    again = SlurmRuntime()  # a new bench process
    assert again.reattach(engine, paths, settings) in ("Slurm job 100 still running: reattached", "Slurm job 100 still pending: reattached")
    execution = again.execute(engine, paths, settings, 600, lambda line: None)
    assert execution.outcome == "exited" and execution.info.job_id == "100" and execution.info.scheduler_state == "COMPLETED"
    assert [c for c in fake_slurm.calls() if c.startswith("sbatch --parsable")] and len(fake_slurm.submitted()) == 1
    # ended COMPLETED with an ok result while bench was away: collected
    assert again.reattach(engine, paths, settings) == "Slurm job 100 ended COMPLETED while bench was away: its result is collected"
    paths.result.write_text('{"status": "failed"}')
    assert again.reattach(engine, paths, settings) is None  # no ok result: run again
    forged = json.loads((paths.run_dir / "slurm-job.json").read_text()) | {"job_name": "someone-else"}
    (paths.run_dir / "slurm-job.json").write_text(json.dumps(forged))
    paths.result.write_text('{"status": "ok"}')
    assert again.reattach(engine, paths, settings) is None  # the controller knows job 100 under another name


def test_local_runs_one_at_a_time_slurm_all_at_once() -> None:
    plans = [RunPlan("pytorch", "fp32", "optimized", 32, 1, 1)]
    local = ChosenRuntime(LocalRuntime(), RuntimeSettings())
    slurm = ChosenRuntime(SlurmRuntime(), RuntimeSettings())
    assert in_flight_limit(plans, {"pytorch": local}) == 1
    assert in_flight_limit(plans, {"pytorch": slurm}) is None
    assert in_flight_limit([RunPlan("pytorch", "fp32", "optimized", 32, 1, 1, "skipped")], {"pytorch": slurm}) == 1


@pytest.mark.parametrize(("given", "env", "message"), [
    ({"max_concurrent": 0}, {}, "slurm.max_concurrent: 0 is outside 1..10000 jobs"),
    ({"max_concurrent": "many"}, {}, "slurm.max_concurrent: 'many' is not a number of jobs"),
    ({}, {"BENCH_SLURM_MAX_CONCURRENT": "-2"}, "BENCH_SLURM_MAX_CONCURRENT: -2 is outside 1..10000 jobs"),
])
def test_max_concurrent_is_checked(given, env, message) -> None:
    with pytest.raises(BadInput, match=message):
        slurm_settings({"slurm": given}, env)
    assert slurm_settings({"slurm": {"max_concurrent": "3"}}, {}).max_concurrent == 3
    assert SlurmSettings().max_concurrent is None  # default: no cap
