"""Slurm runtime: settings parsing and job-script generation (local and container modes)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import BadInput
from orchestrator.runtimes.slurm_job import JobRequest, directives, engine_argv, job_script, settings_from_cli, slurm_settings


def _job(tmp_path: Path, **kw) -> JobRequest:
    run = tmp_path / "art" / "runs" / "pytorch-fp32-optimized-b32-d1-r1"
    base = dict(job_name="bench-A-pytorch-fp32", workdir=run, output=run / "engine.log", spec=run / "spec.json",
                result=run / "result.json", dataset=tmp_path / "data" / "cifar 10", module="bench_pytorch",
                env={"PYTHONUNBUFFERED": "1", "NCCL_NVLS_ENABLE": "0"}, comment="run x")
    base.update(kw)
    return JobRequest(**base)


def _sbatch_lines(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def _exec_argv(script: str) -> list[str]:
    line = next(line for line in script.splitlines() if line.startswith("exec "))
    return shlex.split(line)[1:]


def _bash_ok(script: str, tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text(script)
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_local_mode_script(tmp_path: Path) -> None:
    job = _job(tmp_path, interpreter="/opt/envs/torch env/bin/python", python_path=[Path("/repo/images/common"), Path("/repo/images/pytorch")],
               partition="gpu", account="proj1", time="01:30:00", gpus=2)
    script = job_script(job, ["--exclusive", "--qos=high"])
    _bash_ok(script, tmp_path)
    assert script.startswith("#!/bin/bash\n")
    assert _sbatch_lines(script) == [
        "--job-name=bench-A-pytorch-fp32", f"--output={job.output}", f"--chdir={job.workdir}", "--nodes=1", "--ntasks=1",
        "--open-mode=append", "--partition=gpu", "--account=proj1", "--time=01:30:00", "--gpus=2",
    ]
    assert "# submitted with: sbatch --parsable --exclusive --qos=high <this script>" in script
    assert "export PYTHONPATH=/repo/images/common:/repo/images/pytorch${PYTHONPATH:+:$PYTHONPATH}" in script
    assert "export NCCL_NVLS_ENABLE=0" in script and "export PYTHONUNBUFFERED=1" in script
    # the same command as the local runtime: <interpreter> -m <module> --spec S --result R
    assert _exec_argv(script) == ["/opt/envs/torch env/bin/python", "-m", "bench_pytorch", "--spec", str(job.spec), "--result", str(job.result)]


def test_local_mode_minimal_directives(tmp_path: Path) -> None:
    job = _job(tmp_path, interpreter="/usr/bin/python3")
    options = directives(job)
    assert not any(o.startswith(("--partition", "--account", "--time", "--gpus")) for o in options)


def test_local_script_runs_the_engine_command(tmp_path: Path) -> None:
    """Executed by bash (as a job would be), the script runs the interpreter with the spec and result."""
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "echo_engine.py").write_text(
        "import os, sys, json\n"
        "json.dump({'argv': sys.argv[1:], 'pythonpath': os.environ['PYTHONPATH'], 'unbuf': os.environ['PYTHONUNBUFFERED']},"
        " open(sys.argv[-1], 'w'))\n")
    job = _job(tmp_path, module="echo_engine", interpreter=__import__("sys").executable, python_path=[tmp_path / "mod"])
    job.workdir.mkdir(parents=True)
    script = tmp_path / "job.sh"
    script.write_text(job_script(job))
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "bench: slurm job ? on" in proc.stderr
    import json

    seen = json.loads(job.result.read_text())
    assert seen["argv"] == ["--spec", str(job.spec), "--result", str(job.result)]
    assert seen["pythonpath"].split(":")[0] == str(tmp_path / "mod") and seen["unbuf"] == "1"


def test_pyxis_container_script(tmp_path: Path) -> None:
    job = _job(tmp_path, mode="container", launcher="pyxis", image="registry.local#bench/pytorch:1.0", gpus=1, partition="gpu")
    script = job_script(job)
    _bash_ok(script, tmp_path)
    assert "unset PYTHONPATH PYTHONHOME VIRTUAL_ENV" in script and "export PYTHONPATH" not in script
    argv = _exec_argv(script)
    assert argv[:2] == ["srun", "--ntasks=1"]
    assert "--container-image=registry.local#bench/pytorch:1.0" in argv
    mounts = next(a for a in argv if a.startswith("--container-mounts=")).removeprefix("--container-mounts=")
    # the run folder read-write and the dataset read-only, at the same paths as on the host
    assert mounts.split(",") == [f"{job.workdir}:{job.workdir}", f"{job.dataset}:{job.dataset}:ro"]
    assert f"--container-workdir={job.workdir}" in argv and "--no-container-mount-home" in argv
    assert "--container-env=NCCL_NVLS_ENABLE,PYTHONUNBUFFERED" in argv
    assert argv[-7:] == ["python3", "-m", "bench_pytorch", "--spec", str(job.spec), "--result", str(job.result)]
    assert "--gpus=1" in _sbatch_lines(script)


def test_apptainer_container_script(tmp_path: Path) -> None:
    job = _job(tmp_path, mode="container", launcher="apptainer", image="/images/bench-pytorch.sif", gpus=4)
    script = job_script(job)
    _bash_ok(script, tmp_path)
    argv = _exec_argv(script)
    assert argv[:2] == ["apptainer", "exec"]
    assert argv[argv.index("--bind") + 1] == f"{job.workdir}:{job.workdir},{job.dataset}:{job.dataset}:ro"
    assert argv[argv.index("--pwd") + 1] == str(job.workdir)
    assert "--nv" in argv  # GPUs asked: NVIDIA libraries bound in
    image = argv.index("/images/bench-pytorch.sif")
    assert argv[image + 1:] == ["python3", "-m", "bench_pytorch", "--spec", str(job.spec), "--result", str(job.result)]


def test_apptainer_cpu_has_no_nv(tmp_path: Path) -> None:
    job = _job(tmp_path, mode="container", launcher="apptainer", image="docker-daemon://bench-pytorch:latest", gpus=0)
    assert "--nv" not in engine_argv(job)
    assert not any(line.startswith("--gpus") for line in _sbatch_lines(job_script(job)))


def test_settings_defaults_and_env_fallback() -> None:
    cfg = slurm_settings({}, environ={})
    assert (cfg.partition, cfg.gpus, cfg.mode, cfg.container, cfg.shared_dir, cfg.sbatch_args) == (None, "auto", "local", "auto", None, ())
    env = {"BENCH_SLURM_PARTITION": "gpu", "BENCH_SLURM_ACCOUNT": "acct", "BENCH_SLURM_TIME": "10", "BENCH_SLURM_GPUS": "2",
           "BENCH_SLURM_SBATCH_ARGS": "--exclusive --comment='a b'", "BENCH_SLURM_MODE": "container", "BENCH_SLURM_SHARED_DIR": "/scratch/x"}
    cfg = slurm_settings({}, environ=env)
    assert (cfg.partition, cfg.account, cfg.time, cfg.gpus, cfg.mode) == ("gpu", "acct", "10", 2, "container")
    assert cfg.sbatch_args == ("--exclusive", "--comment=a b") and cfg.shared_dir == Path("/scratch/x")
    # settings (scenario / command line) win over the environment
    cfg = slurm_settings({"slurm": {"partition": "cpu", "gpus": 0, "sbatch_args": ["--mem=4G"]}}, environ=env)
    assert (cfg.partition, cfg.gpus, cfg.sbatch_args, cfg.account) == ("cpu", 0, ("--mem=4G",), "acct")


def test_settings_from_cli_leaves_unset_out() -> None:
    assert settings_from_cli(partition="gpu", gpus="auto") == {"partition": "gpu", "gpus": "auto"}
    assert settings_from_cli() == {}


@pytest.mark.parametrize(("settings", "environ", "message"), [
    ({"slurm": {"mode": "docker"}}, {}, "slurm.mode: 'docker' is not one of local, container"),
    ({}, {"BENCH_SLURM_MODE": "vm"}, "BENCH_SLURM_MODE: 'vm' is not one of local, container"),
    ({"slurm": {"gpus": "two"}}, {}, "slurm.gpus: 'two' is not a GPU count or 'auto'"),
    ({"slurm": {"gpus": -1}}, {}, "slurm.gpus: -1 is negative"),
    ({"slurm": {"container": "docker"}}, {}, "slurm.container: 'docker' is not one of auto, pyxis, apptainer"),
    ({"slurm": {"sbatch_args": "--output=x"}}, {}, "'--output=x' is set by bench itself"),
    ({"slurm": {"sbatch_args": "--comment='unclosed"}}, {}, "slurm.sbatch_args: No closing quotation"),
    ({"slurm": {"partitoin": "gpu"}}, {}, "slurm.partitoin: not a setting of the slurm runtime"),
    ({"slurm": {"poll_s": "soon"}}, {}, "slurm.poll_s: 'soon' is not a number of seconds"),
])
def test_settings_errors(settings: dict, environ: dict, message: str) -> None:
    with pytest.raises(BadInput, match=__import__("re").escape(message)):
        slurm_settings(settings, environ=environ)
