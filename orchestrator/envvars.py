"""Every ``BENCH_*`` environment variable bench knows, in one registry, checked like a flag.

Each :class:`EnvVar` has a name, a kind, a check and a description. :func:`check_environment`
runs before any command (``bench`` refuses a bad value with one line naming the variable, exit
2); the README's table of variables is :func:`markdown_table` of :data:`USER`, and a test keeps
the two in step. Scopes:

- ``user``: read from the user's environment, checked.
- ``test``: read only by bench's own tests and CI scripts; listed, not checked.
- ``internal``: set by bench (or the engine library's launcher) for the processes it starts, per
  run, under the run folder (the heartbeat records, the parent's pid, a worker's rank and start
  wall). Never taken from the user's environment: :func:`without_internal` strips inherited ones
  wherever an engine is started (the local, Docker and Slurm runtimes; ``bench_engine.launch``
  for the workers keeps the same list, :data:`bench_engine.lifeline.INTERNAL_ENV`).

Paths: every folder and file variable needs an absolute path (a relative one would depend on the
folder bench happens to be started from, and engines run in their run folder).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import BadInput
from orchestrator.terminal import visible

Check = Callable[[str], "str | None"]  # the value -> why it is refused (None: accepted)


@dataclass(frozen=True)
class EnvVar:
    """One ``BENCH_*`` variable."""

    name: str
    kind: str
    description: str
    check: Check | None = None
    scope: str = "user"  # user | test | internal


# ----------------------------------------------------------------------------- checks


def _absolute(value: str) -> str | None:
    if "\0" in value:
        return "holds a NUL character"
    if not os.path.isabs(value):
        return f"'{value}' is a relative path; give an absolute one"
    return None


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def writable_folder(value: str) -> str | None:
    """An absolute folder bench writes into: an existing writable folder, or one it can create."""
    why = _absolute(value)
    if why:
        return why
    path = Path(value)
    if path.exists() and not path.is_dir():
        return f"{value} is not a folder"
    existing = _nearest_existing(path)
    if not existing.is_dir():
        return f"{value}: {existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{value}: {existing} is not writable"
    return None


def existing_folder(value: str) -> str | None:
    """An absolute folder bench reads from."""
    why = _absolute(value)
    if why:
        return why
    if not Path(value).is_dir():
        return f"{value} is not a folder" if Path(value).exists() else f"{value} does not exist"
    return None


def writable_file(value: str) -> str | None:
    """An absolute file bench reads and rewrites: a regular file if it exists, in a writable folder."""
    why = _absolute(value)
    if why:
        return why
    path = Path(value)
    if path.exists() and not path.is_file():
        return f"{value} is not a regular file"
    if not path.parent.is_dir():
        return f"{value}: its folder {path.parent} does not exist"
    return None


def executable_file(value: str) -> str | None:
    """An absolute path to an executable regular file."""
    why = _absolute(value)
    if why:
        return why
    if not Path(value).is_file() or not os.access(value, os.X_OK):
        return f"{value} is not an executable file"
    return None


def number(minimum: float, maximum: float, integer: bool = False, zero: bool = False) -> Check:
    """A finite number in ``minimum..maximum`` (``zero``: 0 is accepted too, meaning off)."""

    def check(value: str) -> str | None:
        try:
            parsed = int(value) if integer else float(value)
        except ValueError:
            return f"'{value}' is not {'an integer' if integer else 'a number'}"
        if not math.isfinite(parsed):
            return f"'{value}' is not a finite number"
        if zero and parsed == 0:
            return None
        if not minimum <= parsed <= maximum:
            return f"{value} is outside {minimum:g}..{maximum:g}" + (" (or 0: off)" if zero else "")
        return None

    return check


def choice(*choices: str) -> Check:
    def check(value: str) -> str | None:
        return None if value in choices else f"'{value}' is not one of {', '.join(choices)}"

    return check


SIZE = re.compile(r"[1-9][0-9]{0,15}[bkmg]?", re.I)


def docker_size(value: str) -> str | None:
    return None if SIZE.fullmatch(value) else f"'{value}' is not a size like 8g or 16384m"


def slurm_value(key: str) -> Check:
    """A ``BENCH_SLURM_<KEY>`` fallback, checked as the Slurm runtime checks it."""

    def check(value: str) -> str | None:
        from orchestrator.runtimes.slurm_job import slurm_settings

        try:
            slurm_settings({}, {f"BENCH_SLURM_{key.upper()}": value})
        except BadInput as exc:
            return str(exc).removeprefix(f"BENCH_SLURM_{key.upper()}: ")
        return None

    return check


def engine_path(value: str) -> str | None:
    """Folders (absolute, separated by ``os.pathsep``), each with a well-formed ``engine.yaml``."""
    for entry in filter(None, value.split(os.pathsep)):
        why = existing_folder(entry)
        if why:
            return why
        why = engine_metadata_problem(Path(entry) / "engine.yaml")
        if why:
            return why
    return None


ENGINE_YAML_MAX_BYTES = 1 << 20
ENGINE_KEYS = {"name": str, "module": str}
ENGINE_OPTIONAL = {"framework": str, "framework_module": str, "requirements": str, "precisions": list, "options": dict,
                   "image": dict, "refuse": list}
NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def engine_metadata_problem(meta: Path) -> str | None:
    """Why ``meta`` is not a usable engine.yaml (None: it is)."""
    import yaml

    from orchestrator.scenario.safe_yaml import load_bounded

    if not meta.is_file():
        return f"{meta} not found"
    try:
        with open(meta, "rb") as handle:
            raw = handle.read(ENGINE_YAML_MAX_BYTES + 1)
        if len(raw) > ENGINE_YAML_MAX_BYTES:
            return f"{meta}: larger than {ENGINE_YAML_MAX_BYTES} bytes"
        document = load_bounded(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return f"{meta}: not readable YAML ({visible(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)})"
    if not isinstance(document, dict):
        return f"{meta}: not a mapping"
    for key, kind in {**ENGINE_KEYS, **ENGINE_OPTIONAL}.items():
        if key in document and not isinstance(document[key], kind):
            return f"{meta}: {key} must be a {kind.__name__}"
        if key in ENGINE_KEYS and key not in document:
            return f"{meta}: {key} is missing"
    if not NAME.fullmatch(document["name"]):
        return f"{meta}: name '{document['name']}' is not an engine name (a-z, 0-9, _ and -)"
    for key in ("module", "framework_module"):
        if key in document and not MODULE.fullmatch(document[key]):
            return f"{meta}: {key} '{document[key]}' is not a Python module name"
    return None


# ----------------------------------------------------------------------------- the registry

USER: tuple[EnvVar, ...] = (
    EnvVar("BENCH_DATA_DIR", "folder", "dataset cache (default `~/.cache/bench/datasets`); written by `bench data prepare`",
           writable_folder),
    EnvVar("BENCH_COMPILE_CACHE", "folder", "compilation caches of the local runtime's engines (default `~/.cache/bench/compile`)",
           writable_folder),
    EnvVar("BENCH_ENVS_DIR", "folder", "engines' Python environments made by `bench env create` (default `~/.cache/bench/envs`)",
           writable_folder),
    EnvVar("BENCH_ENGINE_PATH", "path-list", "extra engine folders (absolute, `:`-separated), each with a valid `engine.yaml`",
           engine_path),
    EnvVar("BENCH_IMAGES_LOCK", "file", "the images lock file instead of `images/images.lock.json`", writable_file),
    EnvVar("BENCH_DOCKER_SHM_SIZE", "size", "a container's `/dev/shm` (default `8g`)", docker_size),
    EnvVar("BENCH_SLURM_PARTITION", "text", "Slurm `--partition` (fallback of `--slurm-partition`)", slurm_value("partition")),
    EnvVar("BENCH_SLURM_ACCOUNT", "text", "Slurm `--account`", slurm_value("account")),
    EnvVar("BENCH_SLURM_TIME", "text", "Slurm `--time` per run (`30`, `1:00:00`)", slurm_value("time")),
    EnvVar("BENCH_SLURM_GPUS", "number", "GPUs per Slurm job, or `auto`", slurm_value("gpus")),
    EnvVar("BENCH_SLURM_SBATCH_ARGS", "text", "extra `sbatch` options", slurm_value("sbatch_args")),
    EnvVar("BENCH_SLURM_MODE", "choice", "`local` or `container`", slurm_value("mode")),
    EnvVar("BENCH_SLURM_CONTAINER", "choice", "`auto`, `pyxis` or `apptainer`", slurm_value("container")),
    EnvVar("BENCH_SLURM_IMAGE", "text", "the image of Slurm container mode", slurm_value("image")),
    EnvVar("BENCH_SLURM_SHARED_DIR", "folder", "staging folder every Slurm node sees", writable_folder),
    EnvVar("BENCH_SLURM_POLL_S", "number", "seconds between `scontrol` polls (0.05..600)", number(0.05, 600)),
    EnvVar("BENCH_SLURM_MAX_CONCURRENT", "number", "at most this many of a matrix's Slurm jobs running at once (1..10000; default: no cap)",
           slurm_value("max_concurrent")),
    EnvVar("BENCH_SLURM_LIFELINE_S", "number", "seconds without bench before a job stops its engine (0: off)",
           number(1e-3, 1e9, zero=True)),
    EnvVar("BENCH_TELEMETRY_INTERVAL_S", "number", "seconds between GPU telemetry samples (0.01..60, default 0.15; 0: off)",
           number(0.01, 60, zero=True)),
    EnvVar("BENCH_DIST_TIMEOUT_S", "number", "PyTorch process-group timeout, seconds", number(1, 1e7)),
    EnvVar("BENCH_LAUNCH_GRACE_S", "number", "after a worker fails, seconds the others may take to exit (default 10)",
           number(0, 3600)),
    EnvVar("BENCH_OPENNN_VENDOR", "folder", "folder of OpenNN's pinned source archives", existing_folder),
    EnvVar("BENCH_OPENNN_CACHE", "folder", "OpenNN builds (default `~/.cache/bench/opennn`)", writable_folder),
    EnvVar("BENCH_OPENNN_WORK", "folder", "OpenNN build scratch folder", writable_folder),
    EnvVar("BENCH_OPENNN_DRIVER", "file", "an OpenNN driver binary to use instead of the cached build", executable_file),
    EnvVar("BENCH_OPENNN_CCACHE", "choice", "`0` turns ccache off in OpenNN builds", choice("0", "1")),
    EnvVar("BENCH_DEBUG", "flag", "any value: an internal error prints its traceback"),
)

TEST: tuple[EnvVar, ...] = tuple(EnvVar(name, "test", description, scope="test") for name, description in (
    ("BENCH_TEST_BASE", "base image of the Docker tests"),
    ("BENCH_TEST_CXX_BASE", "C++ base image of the OpenNN image test"),
    ("BENCH_TEST_WORKERS", "workers of the JAX engine test"),
    ("BENCH_REQUIRE_DOCKER", "fail, not skip, without Docker"),
    ("BENCH_REQUIRE_SLURM", "fail, not skip, without Slurm"),
    ("BENCH_REQUIRE_OPENNN", "fail, not skip, without an OpenNN build"),
    ("BENCH_REQUIRE_CHROMIUM", "fail, not skip, without Chromium"),
    ("BENCH_FAULT", "`rank:step[:mode]`: a launched worker fails (bench_engine.launch)"),
    ("BENCH_FAULT_SEED", "seed of the signal fault cases"),
    ("BENCH_FAKE_FAULT", "a fake engine's behaviour for one run"),
    ("BENCH_FAKE_OPENNN", "the fake OpenNN driver's behaviour"),
    ("BENCH_FAKE_LINK_TARGET", "the file a hostile fake engine links its result to (a file of the test)"),
    ("BENCH_FUZZ_RANDOM", "new random fuzz examples"),
    ("BENCH_FUZZ_EXAMPLES", "number of fuzz examples"),
    ("BENCH_RELIABILITY_FIGURES", "where the fault suite writes its figures"),
    ("BENCH_DOCKERD_LOG", "CI: the Docker daemon's log"),
    ("BENCH_TORCH_VERSION", "CI: the PyTorch version of the test image"),
))

INTERNAL: tuple[EnvVar, ...] = tuple(EnvVar(name, "internal", description, scope="internal") for name, description in (
    ("BENCH_HEARTBEAT", "a launched worker's heartbeat record, under the run folder"),
    ("BENCH_PARENT_PID", "the pid an engine process dies with"),
    ("BENCH_WORKER", "marks a launched worker"),
    ("BENCH_LAUNCH_WALL", "the launcher's start time"),
    ("BENCH_RUNTIME", "the runtime an engine runs in"),
))

REGISTRY: dict[str, EnvVar] = {var.name: var for var in (*USER, *TEST, *INTERNAL)}
INTERNAL_NAMES: frozenset[str] = frozenset(var.name for var in INTERNAL)


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse (BadInput, one line naming the variable) the first user-facing variable whose value is bad."""
    environ = os.environ if environ is None else environ
    for var in USER:
        value = environ.get(var.name)
        if value is None or var.check is None:
            continue
        if not value.strip() and var.kind != "flag":
            continue  # empty: the default, as if unset
        if any(not c.isprintable() for c in value):
            raise BadInput(f"{var.name}: its value holds a control character ({visible(value)[:120]})")
        why = var.check(value)
        if why:
            raise BadInput(f"{var.name}: {why}")


def without_internal(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` less bench's internal variables (the processes bench starts get bench's own values)."""
    return {key: value for key, value in environ.items() if key not in INTERNAL_NAMES}


def refuse_internal(env: Mapping[str, object], where: str) -> None:
    """A run's ``env`` settings may not set an internal variable (BadInput naming it)."""
    for key in env:
        if str(key) in INTERNAL_NAMES:
            raise BadInput(f"{where}.{key}: set by bench itself for each run; it cannot be given")


def markdown_table() -> str:
    """The README's table of the user-facing variables."""
    rows = ["| variable | kind | what |", "|---|---|---|"]
    rows += [f"| `{var.name}` | {var.kind} | {var.description} |" for var in USER]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
