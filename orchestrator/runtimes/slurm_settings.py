"""The settings of the slurm runtime, as one typed class: :class:`SlurmSettings`.

Each field declares its type and default, its check, its environment variable ``BENCH_SLURM_<KEY>``
(the fallback) and, for those the command line sets, its ``--slurm-*`` option and help
(:mod:`orchestrator.runtimes.runtime_settings`); ``bench scenario run`` and ``bench scenario resume``
build their options from here (``orchestrator.cli.slurm_options``). The runtime reads
``settings["slurm"]`` (a dict the CLI and the scenario's ``runtime.slurm`` fill) over the
environment with :func:`slurm_settings`.

gpus: a number, or ``auto`` (default): the run's device count when the run asks for CUDA, or asks
for ``auto`` and the partition has GPU gres. mode ``local`` (default): the engine's local Python
environment, the local runtime's command; ``container``: the engine image (``image``, passed as it
is; default ``engines.<name>.image``, else bench's own tag read from the node's Docker daemon:
``dockerd://bench/<engine>:latest`` for pyxis, ``docker-daemon://...`` for apptainer).
``shared_dir``: where job scripts, specs and results are staged (default: the run folder itself).
``max_concurrent``: at most this many of one matrix's jobs run at once, enforced by Slurm (the jobs
are chained with ``--dependency=afterany``, see ``slurm_batch``); default: no cap.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.runtimes.runtime_settings import check_fields, declarations, gather, setting

MODES = ("local", "container")
LAUNCHERS = ("auto", "pyxis", "apptainer")
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


def _pattern(key: str):
    return lambda value, where: checked_value(key, str(value).strip(), where)


def _gpus(value: Any, where: str) -> int | str:
    if str(value).strip().lower() == "auto":
        return "auto"
    try:
        gpus = int(str(value).strip())
    except ValueError:
        raise BadInput(f"{where}: '{value}' is not a GPU count or 'auto'") from None
    if gpus < 0:
        raise BadInput(f"{where}: {gpus} is negative")
    return gpus


def _sbatch_args(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            args = shlex.split(value)
        except ValueError as exc:
            raise BadInput(f"{where}: {exc}") from None
    elif isinstance(value, Sequence):
        args = [str(a) for a in value]
    else:
        raise BadInput(f"{where}: give a string or a list of options")
    return checked_sbatch_args(args, where)


def _choice(choices: tuple[str, ...]):
    def check(value: Any, where: str) -> str:
        if str(value) not in choices:
            raise BadInput(f"{where}: '{value}' is not one of {', '.join(choices)}")
        return str(value)

    return check


def _shared_dir(value: Any, where: str) -> Path:
    shared = Path(str(value)).expanduser().absolute()
    checked_path(shared, where, extra="%,:")
    return shared


def _poll_s(value: Any, where: str) -> float:
    try:
        poll = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"{where}: '{value}' is not a number of seconds") from None
    if not 0.05 <= poll <= 600:
        raise BadInput(f"{where}: {poll:g} is outside 0.05..600 s")
    return poll


MAX_CONCURRENT_LIMIT = 10000


def _max_concurrent(value: Any, where: str) -> int:
    try:
        count = int(str(value).strip())
    except ValueError:
        raise BadInput(f"{where}: '{value}' is not a number of jobs") from None
    if not 1 <= count <= MAX_CONCURRENT_LIMIT:
        raise BadInput(f"{where}: {count} is outside 1..{MAX_CONCURRENT_LIMIT} jobs")
    return count


def _env(key: str) -> str:
    return ENV_PREFIX + key.upper()


@dataclass(frozen=True)
class SlurmSettings:
    """The slurm runtime's settings, checked when made (BadInput ``slurm.<field>: ...`` for a bad value)."""

    partition: str | None = setting(None, _pattern("partition"), env=_env("partition"), flag="--slurm-partition",
                                    help="slurm: partition (env BENCH_SLURM_PARTITION).")
    account: str | None = setting(None, _pattern("account"), env=_env("account"), flag="--slurm-account",
                                  help="slurm: account (env BENCH_SLURM_ACCOUNT).")
    time: str | None = setting(None, _pattern("time"), env=_env("time"), flag="--slurm-time",
                               help="slurm: time limit per run, Slurm syntax, e.g. 30 or 1:00:00 (env BENCH_SLURM_TIME).")
    gpus: int | str = setting("auto", _gpus, env=_env("gpus"), flag="--slurm-gpus",
                              help="slurm: GPUs per run, a number or auto (env BENCH_SLURM_GPUS).")
    sbatch_args: tuple[str, ...] = setting((), _sbatch_args, env=_env("sbatch_args"), flag="--slurm-sbatch-args",
                                           help="slurm: extra sbatch options, e.g. '--exclusive' (env BENCH_SLURM_SBATCH_ARGS).")
    mode: str = setting("local", _choice(MODES), env=_env("mode"), flag="--slurm-mode",
                        help="slurm: local (the engine's Python environment) | container (env BENCH_SLURM_MODE).")
    container: str = setting("auto", _choice(LAUNCHERS), env=_env("container"), flag="--slurm-container",
                             help="slurm container mode: auto | pyxis | apptainer (env BENCH_SLURM_CONTAINER).")
    image: str | None = setting(None, _pattern("image"), env=_env("image"))
    shared_dir: Path | None = setting(None, _shared_dir, env=_env("shared_dir"), flag="--slurm-shared-dir", cli_type=Path,
                                      help="slurm: staging folder every node sees (default: the run folder; env BENCH_SLURM_SHARED_DIR).")
    poll_s: float = setting(2.0, _poll_s, env=_env("poll_s"))  # seconds between ``scontrol show job`` polls
    max_concurrent: int | None = setting(None, _max_concurrent, env=_env("max_concurrent"), flag="--slurm-max-concurrent", cli_type=int,
                                         help="slurm: at most this many of the matrix's jobs running at once (default: no cap; "
                                              "env BENCH_SLURM_MAX_CONCURRENT).")

    def __post_init__(self) -> None:
        check_fields(self, "slurm")


KEYS = tuple(declarations(SlurmSettings))


def slurm_settings(settings: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> SlurmSettings:
    """Parse and check the runtime settings (``settings['slurm']`` over ``BENCH_SLURM_*``)."""
    given = dict(settings.get("slurm") or {})
    return gather(SlurmSettings, given, os.environ if environ is None else environ, "slurm", "the slurm runtime")


def settings_from_cli(**given: Any) -> dict[str, Any]:
    """The ``settings['slurm']`` block from ``--slurm-*`` command-line options (unset ones left out)."""
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise TypeError(f"settings_from_cli: {unknown[0]} is not a slurm setting")
    return {k: str(v) if isinstance(v, Path) else v for k, v in given.items() if v not in (None, "")}
