"""A smoke artifact as a normalised snapshot, to prove that a refactoring leaves behaviour and artifact
formats as they were: run the same smoke before and after and compare the artifacts' documents.

:func:`snapshot` reads an artifact folder into one JSON document: the list of its files and, per
document (every ``*.json``, ``scenario.yaml``, and the ``[bench-engine]`` lines of each
``engine.log``), the document with its volatile values neutralised:

* measured numbers (times, throughputs, losses, weight changes, latencies, ratios, deviations) become
  ``"<float>"`` / ``"<int>"`` (so the key and the type still count, and ``null`` stays ``null``);
* timestamps, artifact ids and hashes of files that hold measured values become ``"<time>"``,
  ``"<artifact-id>"``, ``"<sha256>"`` after their format is checked (a changed format still fails);
* host facts (hostname, CPU, load, NVML, framework builds and versions, the interpreter) become
  ``"<host>"``, keys kept; paths keep only their last part;
* the warnings that depend on the load of the machine (``host_load``, ``outliers``, ``high_spread``)
  are dropped, and digits in the other warnings' messages become ``#``.

Everything else — every key, every type, every count, every setting, every verdict, every stable
hash (the dataset's, the shared initial weights') — is compared exactly by :func:`compare`, which
lists the differences by path.

The golden snapshot (``tests/fixtures/smoke_snapshot/golden.json``) was taken from the code before
the refactoring of issue 24; ``tests/e2e/test_smoke_snapshot.py`` runs :data:`SMOKE_ARGS` and
compares. To refresh the golden deliberately (a format change that is meant), run from the
repository root::

    python3 -m tests.artifact_snapshot --refresh          # runs the smoke (about 1 minute), writes the golden
    python3 -m tests.artifact_snapshot FOLDER             # prints the snapshot of an artifact folder
    python3 -m tests.artifact_snapshot FOLDER --compare   # compares an artifact folder with the golden
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "fixtures" / "smoke_snapshot" / "golden.json"
# The smoke: the README's main job (the seed scenario shrunk by --smoke) on the three engines at fp32,
# the CPU, the local runtime: about 1 minute on a 2-core machine.
SMOKE_ARGS = ("scenario", "run", "scenarios/cifar_resnet50.yaml", "--smoke", "--runtime", "local", "--device", "cpu",
              "--precisions", "fp32")

FLOAT, INT, HOST, TIME, ARTIFACT_ID, SHA256 = "<float>", "<int>", "<host>", "<time>", "<artifact-id>", "<sha256>"
TIME_FORMAT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ID_FORMAT = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}")
SHA256_FORMAT = re.compile(r"[0-9a-f]{64}")
NUMBER = re.compile(r"(?<![0-9A-Za-z_])\d+(\.\d+)?(?=[^0-9A-Za-z_]|s\b|$)")  # a number (7.07 in 7.07s), not digits in a hash
LOAD_DEPENDENT = frozenset({"host_load", "outliers", "high_spread"})  # judge/trust.py: fire or not with the machine's load
STABLE_FILES = ("init/*", "runs/*/init.safetensors", "scenario.yaml")  # files whose bytes do not depend on the run

Path_ = tuple[str | int, ...]
Rule = tuple[str, Callable[[Any, Path_], Any]]  # (key path pattern, normaliser)


class Unexpected(ValueError):
    """A value that should have a known format (a time, an id, a hash) has another."""


def measured(value: Any, where: Path_) -> Any:
    """A measured number (or a structure of them): each float -> <float>, each int -> <int>; None, bools and
    strings (an interval's kind) kept."""
    if isinstance(value, dict):
        return {k: measured(v, (*where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [measured(v, (*where, i)) for i, v in enumerate(value)]
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, int) and not isinstance(value, bool):
        return INT
    return value


def floats(value: Any, where: Path_) -> Any:
    """Like :func:`measured`, for floats only: the integers (steps, samples, counts) stay compared."""
    if isinstance(value, dict):
        return {k: floats(v, (*where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [floats(v, (*where, i)) for i, v in enumerate(value)]
    return FLOAT if isinstance(value, float) else value


def host(value: Any, where: Path_) -> Any:
    """A host fact: the keys of a mapping kept, every value -> <host>."""
    if isinstance(value, dict):
        return {k: HOST for k in value}
    return HOST


def formatted(pattern: re.Pattern[str], marker: str) -> Callable[[Any, Path_], Any]:
    def check(value: Any, where: Path_) -> Any:
        if not (isinstance(value, str) and pattern.fullmatch(value)):
            raise Unexpected(f"{_dotted(where)}: {value!r} is not {marker}")
        return marker

    return check


def basename(value: Any, where: Path_) -> Any:
    if not isinstance(value, str):
        raise Unexpected(f"{_dotted(where)}: a path is {type(value).__name__} {value!r}")
    return "<dir>/" + Path(value).name


def artifact_folder(value: Any, where: Path_) -> Any:
    """The artifact folder of the --json output: <scenario>/<artifact id> kept, the root left out."""
    if not isinstance(value, str):
        raise Unexpected(f"{_dotted(where)}: a path is {type(value).__name__} {value!r}")
    path = Path(value)
    return f"<dir>/{path.parent.name}/{artifact_id(path.name, where)}"


def masked(value: Any, where: Path_) -> Any:
    """A message: every number in it -> #."""
    if isinstance(value, list):
        return [masked(v, (*where, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: masked(v, (*where, k)) if k == "message" else v for k, v in value.items()}
    return NUMBER.sub("#", value) if isinstance(value, str) else value


time, artifact_id, sha256 = formatted(TIME_FORMAT, TIME), formatted(ID_FORMAT, ARTIFACT_ID), formatted(SHA256_FORMAT, SHA256)

SUMMARY_RUN = ("throughput", "apparent_throughput", "weight_change", "setup_s", "warmup_s", "achieved_tflops",
               "energy_j", "energy_per_sample_j", "power_w_mean", "gpu_util_pct_mean", "peak_fraction")
SUMMARY_GROUP = ("throughput", "setup_s", "warmup_s", "latency_ms", "achieved_tflops", "weight_change",
                 "energy_per_sample_j", "power_w", "peak_fraction", "time_to_train_h", "apparent")
SUMMARY: list[Rule] = [
    ("artifact_id", artifact_id),
    ("artifact", artifact_folder),  # the --json output's
    ("host", host),
    *((f"runs.*.{key}", measured) for key in SUMMARY_RUN),
    ("runs.*.warnings", masked),
    *((f"groups.*.{key}", measured) for key in SUMMARY_GROUP),
    ("groups.*.warnings", masked),
    ("warnings", masked),
    ("ratios.*.ratio", measured), ("ratios.*.range", measured), ("ratios.*.ci95", measured), ("ratios.*.p_value", measured),
    ("scaling.*.efficiency", measured), ("scaling.*.speedup", measured), ("scaling.*.throughput", measured),
    ("numerical_parity.*.max_rel_dev", measured), ("numerical_parity.*.at_step", measured),
    ("numerical_parity.*.at_block", measured),
    ("cross_engine_parity.*.max_rel_dev", measured),
]
RULES: dict[str, list[Rule]] = {
    "manifest.json": [("artifact_id", artifact_id), ("created_at", time)],
    "summary.json": SUMMARY,
    "<stdout>": SUMMARY,
    "runs/*/spec.json": [("parity.dataset.path", basename)],
    "runs/*/run.json": [
        ("started_at", time), ("finished_at", time), ("wall_s", measured), ("throughput", measured),
        ("apparent_throughput", measured), ("runtime.interpreter", host), ("host", host),
    ],
    "runs/*/result.json": [
        ("environment.framework_version", host), ("environment.python", host), ("environment.cuda", host),
        ("environment.cudnn", host), ("environment.driver", host), ("environment.devices", host),
        ("environment.extra", host),
        ("work.weight_change", floats),
        ("measurements", floats),
    ],
}


def _dotted(where: Path_) -> str:
    return ".".join(map(str, where)) or "(document)"


def _matches(pattern: str, where: Path_) -> bool:
    parts = pattern.split(".")
    return len(parts) == len(where) and all(p == "*" or p == str(w) for p, w in zip(parts, where, strict=True))


def normalise(document: Any, rules: list[Rule], where: Path_ = ()) -> Any:
    """``document`` with each value at a path one of ``rules`` names put through that rule's normaliser."""
    for pattern, rule in rules:
        if _matches(pattern, where):
            return rule(document, where)
    if isinstance(document, dict):
        return {k: normalise(v, rules, (*where, k)) for k, v in document.items()}
    if isinstance(document, list):
        return [normalise(v, rules, (*where, i)) for i, v in enumerate(document)]
    return document


def _stable_warnings(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without the warnings that fire or not with the load of the machine."""
    out = dict(summary)
    out["runs"] = [{**run, "warnings": [w for w in run.get("warnings", []) if w.get("id") not in LOAD_DEPENDENT]}
                   for run in summary.get("runs", [])]
    groups = []
    for group in summary.get("groups", []):
        kept = [(m, i) for m, i in zip(group.get("warnings", []), group.get("warning_ids", []), strict=True) if i not in LOAD_DEPENDENT]
        groups.append({**group, "warnings": [m for m, _ in kept], "warning_ids": [i for _, i in kept]})
    out["groups"] = groups
    return out


def _manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with the hash and size of every file whose bytes depend on the run neutralised."""
    files = []
    for entry in manifest.get("files", []):
        if not any(fnmatch.fnmatch(entry["path"], pattern) for pattern in STABLE_FILES):
            entry = {**entry, "sha256": sha256(entry["sha256"], ("files", entry["path"], "sha256")), "bytes": INT}
        files.append(entry)
    return {**manifest, "files": files}


ENGINE_PROGRESS = re.compile(r"\[bench-engine\] phase (warmup|timing) ")  # progress lines: how many depends on the pace


def engine_log(text: str) -> list[str]:
    """The ``[bench-engine]`` lines of an engine log (the framework's own lines vary by machine), progress
    lines left out, numbers masked."""
    return [NUMBER.sub("#", line) for line in text.splitlines()
            if line.startswith("[bench-engine]") and not ENGINE_PROGRESS.match(line)]


def document(name: str, data: Any) -> Any:
    """One document of an artifact (``name``: its path in the folder, or ``<stdout>``) normalised."""
    if name in ("summary.json", "<stdout>"):
        data = _stable_warnings(data)
    elif name == "manifest.json":
        data = _manifest(data)
    rules = next((rules for pattern, rules in RULES.items() if fnmatch.fnmatch(name, pattern)), [])
    return normalise(data, rules)


def snapshot(folder: Path, stdout: dict[str, Any] | None = None) -> dict[str, Any]:
    """The normalised snapshot of the artifact at ``folder`` (and of the ``--json`` output that made it)."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    documents: dict[str, Any] = {}
    for name in files:
        path = folder / name
        if name.endswith(".json"):
            documents[name] = document(name, json.loads(path.read_text()))
        elif name == "scenario.yaml":
            documents[name] = document(name, yaml.safe_load(path.read_text()))
        elif name.endswith("engine.log"):
            documents[name] = engine_log(path.read_text(errors="replace"))
    if stdout is not None:
        documents["<stdout>"] = document("<stdout>", stdout)
    return {"files": files, "documents": documents}


def _describe(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."


def differences(golden: Any, current: Any, where: Path_ = ()) -> Iterator[str]:
    """Each way ``current`` differs from ``golden``: a key added or gone, a type, a length or a value changed."""
    at = _dotted(where)
    if isinstance(golden, dict) and isinstance(current, dict):
        for key in golden.keys() - current.keys():
            yield f"{at}: key {key!r} is gone (was {_describe(golden[key])})"
        for key in current.keys() - golden.keys():
            yield f"{at}: key {key!r} is new ({_describe(current[key])})"
        for key in golden.keys() & current.keys():
            yield from differences(golden[key], current[key], (*where, key))
    elif isinstance(golden, list) and isinstance(current, list):
        if len(golden) != len(current):
            yield f"{at}: {len(current)} items, was {len(golden)} ({_describe(current)}, was {_describe(golden)})"
        for i, (g, c) in enumerate(zip(golden, current, strict=False)):
            yield from differences(g, c, (*where, i))
    elif type(golden) is not type(current):
        yield f"{at}: {type(current).__name__} {_describe(current)}, was {type(golden).__name__} {_describe(golden)}"
    elif golden != current:
        yield f"{at}: {_describe(current)}, was {_describe(golden)}"


def compare(golden: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The differences of two snapshots, sorted (empty: the same behaviour and formats)."""
    return sorted(differences(golden, current))


def run_smoke(out: Path, env: dict[str, str] | None = None, timeout: float = 900) -> tuple[Path, dict[str, Any]]:
    """Run :data:`SMOKE_ARGS` with this checkout's code into ``out``; (the artifact folder, the --json output)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "images" / "common"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *SMOKE_ARGS, "--out", str(out), "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the smoke failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    summary = json.loads(proc.stdout)
    return Path(summary["artifact"]), summary


def write(path: Path, snap: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.artifact_snapshot", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, help="an artifact folder (default with --refresh: run the smoke)")
    parser.add_argument("--refresh", action="store_true", help=f"write the snapshot to {GOLDEN.relative_to(REPO)}")
    parser.add_argument("--compare", action="store_true", help="compare the folder's snapshot with the golden")
    args = parser.parse_args(argv)
    if args.folder is None and not args.refresh:
        parser.error("give an artifact folder, or --refresh")
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as tmp:
        stdout = None
        folder = args.folder
        if folder is None:
            env = {**os.environ, "BENCH_DATA_DIR": os.environ.get("BENCH_DATA_DIR") or str(Path(tmp) / "data")}
            folder, stdout = run_smoke(Path(tmp) / "results", env)
        snap = snapshot(folder, stdout)
        if args.compare:
            diffs = compare(json.loads(GOLDEN.read_text()), snap)
            print("\n".join(diffs) or "same as the golden")
            return 1 if diffs else 0
        if args.refresh:
            write(GOLDEN, snap)
            print(f"wrote {GOLDEN.relative_to(REPO)} ({len(snap['files'])} files)")
        else:
            print(json.dumps(snap, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
