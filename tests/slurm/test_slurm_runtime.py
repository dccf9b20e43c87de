"""Slurm runtime against fake Slurm commands: every clear error, and the life of a job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.engines.registry import EngineInfo
from orchestrator.errors import BadInput
from orchestrator.runtimes import RunPaths, RuntimeFacts, RuntimeSettings, get_runtime
from orchestrator.runtimes.slurm import SlurmRuntime
from orchestrator.runtimes.slurm_client import parse_job

REPO = Path(__file__).resolve().parents[2]

FAKE_ENGINE = """\
import json, sys, time
spec_path, result_path = sys.argv[sys.argv.index('--spec') + 1], sys.argv[sys.argv.index('--result') + 1]
spec = json.load(open(spec_path))
print('fake engine: started', flush=True)
print('fake engine: to stderr', file=sys.stderr, flush=True)
time.sleep(spec.get('sleep', 0))
json.dump({'spec': spec_path}, open(result_path, 'w'))
print('fake engine: done', flush=True)
sys.exit(spec.get('exit', 0))
"""


@pytest.fixture()
def engine(tmp_path: Path) -> EngineInfo:
    folder = tmp_path / "images" / "fake"
    folder.mkdir(parents=True)
    (folder / "fake_engine.py").write_text(FAKE_ENGINE)
    return EngineInfo(name="fake", framework="Fake", module="fake_engine", framework_module="json", folder=folder, precisions=("fp32",))


def _paths(tmp_path: Path, spec: dict) -> RunPaths:
    run = tmp_path / "results" / "scn" / "20260101T000000Z-abcdef" / "runs" / "fake-fp32-optimized-b32-d1-r1"
    run.mkdir(parents=True)
    (run / "spec.json").write_text(json.dumps({"device": "cpu", "parity": {"devices": 1}, **spec}))
    return RunPaths(run, run / "spec.json", run / "result.json", run / "engine.log", tmp_path / "data")


def _settings(**slurm) -> RuntimeSettings:
    return RuntimeSettings.from_blocks({"slurm": {"poll_s": 0.1, **slurm}}).with_checked(RuntimeFacts("slurm", interpreter=sys.executable))


def test_registered() -> None:
    assert isinstance(get_runtime("slurm"), SlurmRuntime)


def test_parse_job() -> None:
    fields = parse_job("JobId=7 JobName=bench x JobState=RUNNING Reason=None ExitCode=0:0 NodeList=n[1-2] BatchHost=n1")
    assert fields["JobState"] == "RUNNING" and fields["BatchHost"] == "n1" and fields["ExitCode"] == "0:0"


# -- clear errors (BadInput, exit 2) ----------------------------------------------------------------

def test_check_ok(fake_slurm, engine) -> None:
    info = SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"slurm": {"partition": "debug", "time": "10"}}))
    assert info.to_json() == {"name": "slurm", "interpreter": info.interpreter, "mode": "local", "partition": "debug"}
    assert any(call.startswith("sbatch --test-only --output=/dev/null --partition=debug --time=10") for call in fake_slurm.calls())


def test_commands_not_found(fake_slurm, engine, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(fake_slurm.bin))
    fake_slurm.remove("sbatch")
    fake_slurm.remove("squeue")
    with pytest.raises(BadInput, match="Slurm commands sbatch, squeue not found on PATH"):
        SlurmRuntime().check(engine, RuntimeSettings.from_blocks({}))


def test_controller_unreachable(fake_slurm, engine) -> None:
    fake_slurm.set("ping", "Slurmctld(primary) at ctl is DOWN")
    with pytest.raises(BadInput, match=r"the Slurm controller is unreachable \(Slurmctld\(primary\) at ctl is DOWN\)"):
        SlurmRuntime().check(engine, RuntimeSettings.from_blocks({}))


def test_unknown_partition(fake_slurm, engine) -> None:
    fake_slurm.set("partitions", "debug|(null)\ngpu|gpu:8\n")
    with pytest.raises(BadInput, match=r"slurm.partition: unknown partition 'a100' \(the cluster has: debug, gpu\)"):
        SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"slurm": {"partition": "a100"}}))


def test_shared_dir_not_writable(fake_slurm, engine, tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(BadInput, match=r"slurm.shared_dir: .*a-file/shared: not writable"):
        SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"slurm": {"shared_dir": str(blocker / "shared")}}))


def test_request_refused(fake_slurm, engine) -> None:
    fake_slurm.set("test_only_error", "Invalid account or account/partition combination specified")
    with pytest.raises(BadInput, match=r"refuses the job request \(--account=nobody\): sbatch: error: Invalid account"):
        SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"slurm": {"account": "nobody"}}))


def test_container_mode_without_launcher(fake_slurm, engine, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(fake_slurm.bin))  # no srun with pyxis, no apptainer
    with pytest.raises(BadInput, match=r"neither pyxis .* nor apptainer"):
        SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"slurm": {"mode": "container"}}))
    info = SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"slurm": {"mode": "container", "container": "apptainer", "image": "/img/fake.sif"}}))
    assert info.container_launcher == "apptainer" and info.image == "/img/fake.sif"
    info = SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"slurm": {"mode": "container", "container": "pyxis"}}))
    assert info.image == "dockerd://bench/fake:latest"  # bench's own local tag, from the node's Docker daemon
    info = SlurmRuntime().check(engine, RuntimeSettings.from_blocks({"image": "reg.example/fake:1", "slurm": {"mode": "container", "container": "pyxis"}}))
    assert info.image == "reg.example/fake:1"  # engines.<name>.image as given


@pytest.mark.parametrize(("env", "message", "extra"), [
    ({"BENCH_SLURM_PARTITION": "nope"}, "unknown partition 'nope'", []),
    ({"BENCH_SLURM_MODE": "vm"}, "BENCH_SLURM_MODE: 'vm' is not one of local, container", []),
    ({"BENCH_SLURM_MAX_CONCURRENT": "0"}, "BENCH_SLURM_MAX_CONCURRENT: 0 is outside 1..10000 jobs", []),
    ({}, "slurm.max_concurrent: 0 is outside 1..10000 jobs", ["--slurm-max-concurrent", "0"]),
])
def test_cli_exit_2(fake_slurm, tmp_path, env, message, extra) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from orchestrator.cli.app import main; main()", "scenario", "run", "cifar_resnet50", "--smoke",
         "--engines", "pytorch", "--precisions", "fp32", "--runtime", "slurm", "--out", str(tmp_path / "out"), *extra],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, **env}, timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in " ".join(proc.stderr.split())
    assert not (tmp_path / "out").exists()


# -- the life of a job --------------------------------------------------------------------------------

def test_job_completes(fake_slurm, engine, tmp_path) -> None:
    paths = _paths(tmp_path, {})
    lines: list[str] = []
    execution = SlurmRuntime().execute(engine, paths, _settings(partition="debug"), 60, lines.append)
    assert execution.outcome == "exited" and execution.exit_code == 0, execution
    info = execution.info
    assert (info.name, info.job_id, info.node, info.scheduler_state, info.exit_code) == ("slurm", "100", "fake", "COMPLETED", "0:0")
    assert info.interpreter == sys.executable and info.partition == "debug"
    assert json.loads(paths.result.read_text())["spec"] == str(paths.spec)
    log = paths.log.read_text()
    assert "fake engine: started" in log and "fake engine: to stderr" in log and "fake engine: done" in log
    assert "slurm: submitted job 100 to partition debug" in lines and "fake engine: done" in lines
    assert lines.count("fake engine: started") == 1
    script = (paths.run_dir / "slurm-job.sh").read_text()
    assert f"#SBATCH --output={paths.log}" in script and "#SBATCH --partition=debug" in script
    assert any(c.startswith("sbatch --parsable") for c in fake_slurm.calls())


def test_job_fails(fake_slurm, engine, tmp_path) -> None:
    paths = _paths(tmp_path, {"exit": 3})
    execution = SlurmRuntime().execute(engine, paths, _settings(), 60, lambda line: None)
    assert (execution.outcome, execution.exit_code, execution.info.scheduler_state, execution.info.exit_code) == ("exited", 3, "FAILED", "3:0")


def test_timeout_cancels_the_job(fake_slurm, engine, tmp_path) -> None:
    paths = _paths(tmp_path, {"sleep": 60})
    clock = time.monotonic()
    execution = SlurmRuntime().execute(engine, paths, _settings(), 1.0, lambda line: None)
    assert execution.outcome == "timeout" and "exceeded the 1 s timeout; Slurm job 100 cancelled" in execution.detail
    assert time.monotonic() - clock < 30
    assert "scancel 100" in fake_slurm.calls()
    assert execution.info.scheduler_state == "CANCELLED"
    assert fake_slurm.running_jobs() == []


def test_ctrl_c_cancels_the_job(fake_slurm, engine, tmp_path) -> None:
    paths = _paths(tmp_path, {"sleep": 60})

    def sink(line: str) -> None:
        if line == "fake engine: started":
            raise KeyboardInterrupt

    execution = SlurmRuntime().execute(engine, paths, _settings(), 600, sink)
    assert execution.outcome == "interrupted" and "Slurm job 100 cancelled" in execution.detail
    assert "scancel 100" in fake_slurm.calls() and fake_slurm.running_jobs() == []
    assert execution.info.job_id == "100"


def test_sbatch_failure_is_an_error(fake_slurm, engine, tmp_path) -> None:
    fake_slurm.set("sbatch_error", "Batch job submission failed: Job violates accounting/QOS policy")
    execution = SlurmRuntime().execute(engine, _paths(tmp_path, {}), _settings(), 60, lambda line: None)
    assert execution.outcome == "error" and "sbatch failed: sbatch: error: Batch job submission failed" in execution.detail
    assert execution.info.job_id is None


def test_shared_dir_staging(fake_slurm, engine, tmp_path) -> None:
    shared = tmp_path / "shared"
    paths = _paths(tmp_path, {})
    lines: list[str] = []
    execution = SlurmRuntime().execute(engine, paths, _settings(shared_dir=str(shared)), 60, lines.append)
    assert execution.outcome == "exited" and execution.exit_code == 0
    # the result came home, the log was copied line by line, the staging folder is gone
    assert json.loads(paths.result.read_text())["spec"].startswith(str(shared / "bench-20260101T000000Z-abcdef" / paths.run_dir.name))
    assert "fake engine: done" in paths.log.read_text()
    assert lines.count("fake engine: started") == 1
    assert not (shared / "bench-20260101T000000Z-abcdef" / paths.run_dir.name).exists()
    assert f"--output={shared}" in (paths.run_dir / "slurm-job.sh").read_text()


@pytest.mark.parametrize(("spec", "gpus", "partitions", "expected"), [
    ({"device": "cpu", "parity": {"devices": 2}}, "auto", "gpu|gpu:8", 0),
    ({"device": "cuda", "parity": {"devices": 2}}, "auto", "debug|(null)", 2),
    ({"device": "auto", "parity": {"devices": 4}}, "auto", "gpu|gpu:8", 4),
    ({"device": "auto", "parity": {"devices": 4}}, "auto", "debug|(null)", 0),
    ({"device": "cpu", "parity": {"devices": 1}}, 3, "debug|(null)", 3),
])
def test_gpus_per_run(fake_slurm, spec, gpus, partitions, expected) -> None:
    from orchestrator.runtimes.slurm_settings import SlurmSettings

    fake_slurm.set("partitions", partitions)
    assert SlurmRuntime._gpus(SlurmSettings(gpus=gpus), spec["device"], spec["parity"]["devices"]) == expected
