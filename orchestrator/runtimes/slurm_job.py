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
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_engine.lifeline import INTERNAL_ENV as INTERNAL_NAMES  # bench's own variables (orchestrator.envvars checks the two agree)
from orchestrator.errors import BadInput

MODES = ("local", "container")
LAUNCHERS = ("auto", "pyxis", "apptainer")
KEYS = ("partition", "account", "time", "gpus", "sbatch_args", "mode", "container", "image", "shared_dir", "poll_s")
ENV_PREFIX = "BENCH_SLURM_"

# Every value that reaches a job script matches one of these (or is refused, exit 2): the script is
# read twice, by sbatch (its #SBATCH lines) and by bash, and a newline would end either's line.
PATTERNS = {
    "partition": (re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*"), "partition names (letters, digits, '_', '.', '-'), comma-separated"),
    "account": (re.compile(r"[A-Za-z0-9_.-]+"), "an account name (letters, digits, '_', '.', '-')"),
    "time": (re.compile(r"\d{1,9}(-\d{1,4})?(:\d{1,4}){0,2}|UNLIMITED|INFINITE", re.IGNORECASE), "a Slurm time: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S"),
    "image": (re.compile(r"[A-Za-z0-9_./:@#+=~-]+"), "an image reference or path (letters, digits and _./:@#+=~-, no spaces or commas)"),
}
# an sbatch option with its value attached: --name, --name=value, -x, -xVALUE (values may hold spaces)
SBATCH_OPTION = re.compile(r"--[A-Za-z][A-Za-z0-9-]*(=[^\x00-\x1f\x7f]*)?|-[A-Za-z][^\x00-\x1f\x7f\s]*")
SET_BY_BENCH = ("--output", "--error", "--job-name", "--chdir", "--wrap", "-o", "-e", "-J", "-D")
REFUSED_OPTIONS = ("--parsable", "--wait", "-W", "--test-only")
SHORT_WITH_VALUE = "AabBcCdFGiLmMnNpqStwx"  # sbatch's short options that take a value (-c8, -pgpu)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
JOB_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_PLAIN = re.compile(r"[A-Za-z0-9_./:=@+,-]+")


def checked_value(key: str, value: str, where: str) -> str:
    """``value`` when it matches the pattern of ``key`` (see PATTERNS); BadInput otherwise."""
    pattern, what = PATTERNS[key]
    if not pattern.fullmatch(value):
        raise BadInput(f"{where}: {value[:80]!r} is not {what}")
    return value


def checked_path(path: Path | str, where: str, extra: str = "") -> str:
    """A path with no control character (nor any of ``extra``), as text; BadInput otherwise."""
    text = str(path)
    bad = CONTROL.search(text) or next((c for c in extra if c in text), None)
    if bad:
        char = bad.group() if isinstance(bad, re.Match) else bad
        raise BadInput(f"{where}: the path {text[:80]!r} holds {char!r}, which a Slurm job script cannot carry safely")
    return text


def checked_sbatch_args(args: Sequence[str], where: str) -> tuple[str, ...]:
    """Extra sbatch options: each one an option with its value attached (``--mem=4G``), none that bench sets itself."""
    for arg in args:
        if not SBATCH_OPTION.fullmatch(arg):
            raise BadInput(f"{where}: {arg[:80]!r} is not an sbatch option with its value attached (e.g. --mem=4G, --qos=high, -c8)")
        name = arg.split("=", 1)[0]
        # sbatch takes any unambiguous prefix of a long option (--wra=... is --wrap=...)
        long_match = name.startswith("--") and any(o.startswith(name) for o in (*SET_BY_BENCH, *REFUSED_OPTIONS) if o.startswith("--"))
        short = "" if arg.startswith("--") else arg[1]
        if long_match or (short and short in "oeJDW"):
            raise BadInput(f"{where}: '{arg[:80]}' is set by bench itself")
        if short and len(arg) > 2 and short not in SHORT_WITH_VALUE:  # -vJx would be -v -J x
            raise BadInput(f"{where}: '{arg[:80]}': give short options one by one (-{short}), values only to options that take one")
    return tuple(args)


def directive_value(value: str) -> str:
    """A value as sbatch reads it from an ``#SBATCH`` line: plain, or double-quoted with ``\\`` and ``\"`` escaped."""
    if _PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
            values[key] = checked_value(key, str(raw[key][0]).strip(), _where(key, raw[key][1]))
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
        values["sbatch_args"] = checked_sbatch_args(args, _where("sbatch_args", env))
    for key, choices in (("mode", MODES), ("container", LAUNCHERS)):
        if key in raw:
            value, env = raw[key]
            if str(value) not in choices:
                raise BadInput(f"{_where(key, env)}: '{value}' is not one of {', '.join(choices)}")
            values[key] = str(value)
    if "shared_dir" in raw:
        shared = Path(str(raw["shared_dir"][0])).expanduser().absolute()
        checked_path(shared, _where("shared_dir", raw["shared_dir"][1]), extra="%,:")
        values["shared_dir"] = shared
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
