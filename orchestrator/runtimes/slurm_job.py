"""Slurm runtime helpers: settings and job-script generation (pure functions, unit-tested).

The settings of the ``slurm`` runtime come from ``settings["slurm"]`` (a dict the CLI and the
scenario fill) over the environment variables ``BENCH_SLURM_<KEY>`` (the fallback):

=============  ========================  ====================================================
key            env                       meaning
=============  ========================  ====================================================
partition      BENCH_SLURM_PARTITION     ``--partition`` (default: the cluster's default)
account        BENCH_SLURM_ACCOUNT       ``--account``
time           BENCH_SLURM_TIME          ``--time`` per run, Slurm syntax (``30``, ``1:00:00``)
gpus           BENCH_SLURM_GPUS          GPUs per run: a number, or ``auto`` (default): the
                                         run's device count when the run asks for CUDA, or
                                         asks for ``auto`` and the partition has GPU gres
sbatch_args    BENCH_SLURM_SBATCH_ARGS   extra ``sbatch`` options (a shell-quoted string or a
                                         list), e.g. ``--exclusive --cpus-per-task=8``
mode           BENCH_SLURM_MODE          ``local`` (default): the engine's local Python
                                         environment, same command as the local runtime;
                                         ``container``: the engine image
container      BENCH_SLURM_CONTAINER     ``auto`` (default) | ``pyxis`` (``srun
                                         --container-image``) | ``apptainer``
image          BENCH_SLURM_IMAGE         the image for container mode, passed as it is (default:
                                         ``engines.<name>.image``, else bench's own tag read
                                         from the node's Docker daemon: ``dockerd://bench/<engine>:latest``
                                         for pyxis, ``docker-daemon://...`` for apptainer)
shared_dir     BENCH_SLURM_SHARED_DIR    where job scripts, specs and results are staged
                                         (default: the artifact's run folder itself)
poll_s         BENCH_SLURM_POLL_S        seconds between ``scontrol show job`` polls (default 2)
=============  ========================  ====================================================
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import BadInput

MODES = ("local", "container")
LAUNCHERS = ("auto", "pyxis", "apptainer")
KEYS = ("partition", "account", "time", "gpus", "sbatch_args", "mode", "container", "image", "shared_dir", "poll_s")
ENV_PREFIX = "BENCH_SLURM_"


@dataclass(frozen=True)
class SlurmSettings:
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus: int | str = "auto"  # an int >= 0, or "auto"
    sbatch_args: tuple[str, ...] = ()
    mode: str = "local"
    container: str = "auto"
    image: str | None = None
    shared_dir: Path | None = None
    poll_s: float = 2.0


def _where(key: str, from_env: bool) -> str:
    return f"{ENV_PREFIX}{key.upper()}" if from_env else f"slurm.{key}"


def slurm_settings(settings: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> SlurmSettings:
    """Parse and check the runtime settings (``settings['slurm']`` over ``BENCH_SLURM_*``)."""
    environ = os.environ if environ is None else environ
    given = dict(settings.get("slurm") or {})
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise BadInput(f"slurm.{unknown[0]}: not a setting of the slurm runtime (known: {', '.join(KEYS)})")
    raw: dict[str, tuple[Any, bool]] = {}
    for key in KEYS:
        if given.get(key) not in (None, ""):
            raw[key] = (given[key], False)
        elif environ.get(ENV_PREFIX + key.upper(), "").strip():
            raw[key] = (environ[ENV_PREFIX + key.upper()].strip(), True)
    values: dict[str, Any] = {}
    for key in ("partition", "account", "time", "image"):
        if key in raw:
            values[key] = str(raw[key][0]).strip()
    if "gpus" in raw:
        value, env = raw["gpus"]
        if str(value).strip().lower() == "auto":
            values["gpus"] = "auto"
        else:
            try:
                gpus = int(str(value).strip())
            except ValueError:
                raise BadInput(f"{_where('gpus', env)}: '{value}' is not a GPU count or 'auto'") from None
            if gpus < 0:
                raise BadInput(f"{_where('gpus', env)}: {gpus} is negative")
            values["gpus"] = gpus
    if "sbatch_args" in raw:
        value, env = raw["sbatch_args"]
        if isinstance(value, str):
            try:
                args = shlex.split(value)
            except ValueError as exc:
                raise BadInput(f"{_where('sbatch_args', env)}: {exc}") from None
        elif isinstance(value, Sequence):
            args = [str(a) for a in value]
        else:
            raise BadInput(f"{_where('sbatch_args', env)}: give a string or a list of options")
        for arg in args:
            if arg in ("--parsable", "--wait", "-W", "--test-only") or arg.startswith(("--output", "--error", "--job-name", "--chdir", "-o", "-e", "-J", "-D")):
                raise BadInput(f"{_where('sbatch_args', env)}: '{arg}' is set by bench itself")
        values["sbatch_args"] = tuple(args)
    for key, choices in (("mode", MODES), ("container", LAUNCHERS)):
        if key in raw:
            value, env = raw[key]
            if str(value) not in choices:
                raise BadInput(f"{_where(key, env)}: '{value}' is not one of {', '.join(choices)}")
            values[key] = str(value)
    if "shared_dir" in raw:
        values["shared_dir"] = Path(str(raw["shared_dir"][0])).expanduser().absolute()
    if "poll_s" in raw:
        value, env = raw["poll_s"]
        try:
            poll = float(value)
        except (TypeError, ValueError):
            raise BadInput(f"{_where('poll_s', env)}: '{value}' is not a number of seconds") from None
        if not 0.05 <= poll <= 600:
            raise BadInput(f"{_where('poll_s', env)}: {poll:g} is outside 0.05..600 s")
        values["poll_s"] = poll
    return SlurmSettings(**values)


def settings_from_cli(partition: str | None = None, account: str | None = None, time: str | None = None,
                      gpus: str | None = None, sbatch_args: str | None = None, mode: str | None = None,
                      container: str | None = None, image: str | None = None, shared_dir: str | Path | None = None) -> dict[str, Any]:
    """The ``settings['slurm']`` block from ``--slurm-*`` command-line options (unset ones left out)."""
    given = {"partition": partition, "account": account, "time": time, "gpus": gpus, "sbatch_args": sbatch_args,
             "mode": mode, "container": container, "image": image, "shared_dir": str(shared_dir) if shared_dir else None}
    return {k: v for k, v in given.items() if v not in (None, "")}


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


def request_options(partition: str | None, account: str | None, time: str | None, gpus: int) -> list[str]:
    """The sbatch options of what the user asked for (partition, account, time limit, GPUs)."""
    options = []
    if partition:
        options.append(f"--partition={partition}")
    if account:
        options.append(f"--account={account}")
    if time:
        options.append(f"--time={time}")
    if gpus:
        options.append(f"--gpus={gpus}")
    return options


def directives(job: JobRequest) -> list[str]:
    """The ``#SBATCH`` options of the job (extra sbatch options go on the command line)."""
    fixed = [f"--job-name={job.job_name}", f"--output={job.output}", f"--chdir={job.workdir}",
             "--nodes=1", "--ntasks=1", "--open-mode=append"]
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
    """The batch script: ``#SBATCH`` lines, the environment, then ``exec`` of the engine."""
    q = shlex.quote
    lines = ["#!/bin/bash", f"# bench job: {job.comment}" if job.comment else "# bench job"]
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
    lines += [f"export {name}={q(value)}" for name, value in sorted(env.items())]
    lines += [f"cd {q(str(job.workdir))}", "exec " + " ".join(q(a) for a in engine_argv(job)), ""]
    return "\n".join(line for line in lines if line is not None)
