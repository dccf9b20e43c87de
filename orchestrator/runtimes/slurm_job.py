"""Slurm runtime helpers: job-script generation (pure functions, unit-tested).

The settings (``SlurmSettings``, ``slurm_settings``) are in :mod:`orchestrator.runtimes.slurm_settings`;
they stay importable from here.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench_engine.lifeline import INTERNAL_ENV as INTERNAL_NAMES  # bench's own variables (orchestrator.envvars checks the two agree)
from orchestrator.errors import BadInput
from orchestrator.runtimes.slurm_settings import (  # noqa: F401  (the settings, importable from here as before)
    CONTROL,
    KEYS,
    SlurmSettings,
    checked_path,
    checked_sbatch_args,
    checked_value,
    settings_from_cli,
    slurm_settings,
)

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
JOB_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_PLAIN = re.compile(r"[A-Za-z0-9_./:=@+,-]+")


def directive_value(value: str) -> str:
    """A value as sbatch reads it from an ``#SBATCH`` line: plain, or double-quoted with ``\\`` and ``\"`` escaped."""
    if _PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class JobRequest:
    """Everything one job script needs; built by the runtime, rendered by :func:`job_script`."""

    job_name: str
    workdir: Path  # the job folder (script, spec, result, output)
    output: Path  # the job's stdout+stderr file
    spec: Path
    result: Path
    dataset: Path
    module: str  # the engine's python module (python -m <module>)
    mode: str = "local"
    interpreter: str | None = None  # local mode
    python_path: Sequence[Path] = ()  # local mode
    launcher: str | None = None  # container mode: pyxis | apptainer
    image: str | None = None  # container mode
    container_python: str = "python3"
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus: int = 0
    env: Mapping[str, str] = field(default_factory=dict)
    comment: str = ""
    lifeline_s: float = 0.0  # > 0: the job ends its engine when bench's lifeline file is older than this


LIFELINE_NAME = ".bench-lifeline"  # in the job folder; bench touches it while it follows the job
DEFAULT_LIFELINE_S = 300.0  # BENCH_SLURM_LIFELINE_S; 0 turns the watch off


def lifeline_path(job: JobRequest) -> Path:
    return job.workdir / LIFELINE_NAME


def lifeline_seconds(environ: Mapping[str, str] | None = None) -> float:
    """How old bench's lifeline may grow before the job stops its engine (``BENCH_SLURM_LIFELINE_S``)."""
    raw = (os.environ if environ is None else environ).get("BENCH_SLURM_LIFELINE_S", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_LIFELINE_S
    except ValueError:
        raise BadInput(f"BENCH_SLURM_LIFELINE_S: {raw!r} is not a number of seconds") from None
    if value < 0 or value != value:
        raise BadInput(f"BENCH_SLURM_LIFELINE_S: {raw!r} must be 0 (off) or a positive number of seconds")
    return value


def _watched_engine(job: JobRequest, command: str) -> list[str]:
    """Script lines that run ``command`` and end it when bench stops touching the lifeline file
    (bench was SIGKILLed or its host died: nobody is left to ``scancel`` the job)."""
    limit = max(1, round(job.lifeline_s))
    every = max(1, min(10, limit // 4))
    lifeline = shlex.quote(str(lifeline_path(job)))
    return [
        f"{command} &",
        "engine=$!",
        "trap 'kill -TERM $engine 2>/dev/null' TERM INT HUP",
        "while kill -0 $engine 2>/dev/null; do",
        f"  sleep {every}",
        f"  age=$(( $(date +%s) - $(stat -c %Y {lifeline} 2>/dev/null || echo 0) ))",
        f"  if [ $age -gt {limit} ] && kill -0 $engine 2>/dev/null; then",
        f'    echo "bench: no sign of bench for $age s (lifeline {limit} s): stopping the engine" >&2',
        "    kill -TERM $engine 2>/dev/null",
        "    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 $engine 2>/dev/null || break; sleep 1; done",
        "    kill -KILL $engine 2>/dev/null || true",
        "    wait $engine || true",
        "    exit 143",
        "  fi",
        "done",
        "wait $engine",
    ]


def request_options(partition: str | None, account: str | None, time: str | None, gpus: int) -> list[str]:
    """The sbatch options of what the user asked for (partition, account, time limit, GPUs), each value checked."""
    options = []
    if partition:
        options.append(f"--partition={checked_value('partition', partition, 'slurm.partition')}")
    if account:
        options.append(f"--account={checked_value('account', account, 'slurm.account')}")
    if time:
        options.append(f"--time={checked_value('time', str(time), 'slurm.time')}")
    if gpus:
        options.append(f"--gpus={int(gpus)}")
    return options


def check_job(job: JobRequest) -> None:
    """BadInput when a value of the job could break out of its line of the script (or of a mount list)."""
    if not JOB_NAME.fullmatch(job.job_name):
        raise BadInput(f"slurm: job name {job.job_name[:80]!r} has characters other than letters, digits and _.+-")
    # '%' starts a Slurm file-name pattern; ',' and ':' separate the container mount list
    mounts = ",:" if job.mode == "container" else ""
    checked_path(job.workdir, "slurm job folder", extra="%" + mounts)
    checked_path(job.output, "slurm job output", extra="%")
    checked_path(job.dataset, "dataset folder", extra=mounts)
    for where, path in (("run spec", job.spec), ("run result", job.result), ("--python", job.interpreter or ""),
                        ("engine module", job.module), ("container python", job.container_python),
                        *(("PYTHONPATH entry", p) for p in job.python_path)):
        checked_path(path, where)
    if job.image is not None:
        checked_value("image", job.image, "slurm.image")
    for name, value in job.env.items():
        if not ENV_NAME.fullmatch(name):
            raise BadInput(f"environment variable name {name[:80]!r} is not a shell name")
        if CONTROL.search(value):
            raise BadInput(f"environment variable {name}: its value holds a control character (newline, ...)")


def directives(job: JobRequest) -> list[str]:
    """The ``#SBATCH`` options of the job (extra sbatch options go on the command line), values quoted for sbatch."""
    fixed = [f"--job-name={job.job_name}", f"--output={directive_value(str(job.output))}",
             f"--chdir={directive_value(str(job.workdir))}", "--nodes=1", "--ntasks=1", "--open-mode=append"]
    return fixed + request_options(job.partition, job.account, job.time, job.gpus)


def engine_argv(job: JobRequest) -> list[str]:
    """The command the job runs (its last line, after ``exec``)."""
    q = [str(job.spec), str(job.result)]
    if job.mode == "local":
        return [str(job.interpreter), "-m", job.module, "--spec", q[0], "--result", q[1]]
    inner = [job.container_python, "-m", job.module, "--spec", q[0], "--result", q[1]]
    if job.launcher == "pyxis":
        mounts = f"{job.workdir}:{job.workdir},{job.dataset}:{job.dataset}:ro"
        env_names = ",".join(sorted(job.env))
        argv = ["srun", "--ntasks=1", f"--container-image={job.image}", f"--container-mounts={mounts}",
                f"--container-workdir={job.workdir}", "--no-container-mount-home"]
        if env_names:
            argv.append(f"--container-env={env_names}")
        return [*argv, *inner]
    if job.launcher == "apptainer":
        argv = ["apptainer", "exec", "--bind", f"{job.workdir}:{job.workdir},{job.dataset}:{job.dataset}:ro",
                "--pwd", str(job.workdir)]
        if job.gpus:
            argv.append("--nv")
        return [*argv, str(job.image), *inner]
    raise ValueError(f"unknown container launcher {job.launcher!r}")


def job_script(job: JobRequest, extra_args: Sequence[str] = ()) -> str:
    """The batch script: ``#SBATCH`` lines, the environment, then ``exec`` of the engine.

    BadInput when any value could break out of its line (see :func:`check_job`, :func:`checked_sbatch_args`).
    """
    check_job(job)
    checked_sbatch_args(extra_args, "slurm.sbatch_args")
    q = shlex.quote
    comment = CONTROL.sub("?", job.comment)
    lines = ["#!/bin/bash", f"# bench job: {comment}" if comment else "# bench job"]
    lines.append("# submitted with: sbatch --parsable" + "".join(" " + q(a) for a in extra_args) + " <this script>")
    lines += [f"#SBATCH {option}" for option in directives(job)]
    lines += ["", "set -eu",
              'echo "bench: slurm job ${SLURM_JOB_ID:-?} on $(hostname) started $(date -u +%Y-%m-%dT%H:%M:%SZ)" >&2']
    env = dict(job.env)
    if job.mode == "local":
        path = ":".join(str(p) for p in job.python_path)
        lines.append(f"export PYTHONPATH={q(path)}${{PYTHONPATH:+:$PYTHONPATH}}" if path else "")
    else:
        # the image carries its own Python and engine: nothing of the submitting shell's Python leaks in
        lines.append("unset PYTHONPATH PYTHONHOME VIRTUAL_ENV")
    lines.append("unset " + " ".join(sorted(INTERNAL_NAMES)))  # sbatch exports the submitting shell's: bench's own are not taken
    lines += [f"export {name}={q(value)}" for name, value in sorted(env.items())]
    command = " ".join(q(a) for a in engine_argv(job))
    lines.append(f"cd {q(str(job.workdir))}")
    lines += _watched_engine(job, command) if job.lifeline_s > 0 else ["exec " + command]
    lines.append("")
    return "\n".join(line for line in lines if line is not None)
