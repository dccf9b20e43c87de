"""The artifacts of a results folder, newest first (``bench results list``), and ``latest`` as an artifact argument.

A results folder holds ``<scenario>/<artifact-id>/`` folders and ``archives/<scenario>/<artifact-id>.tar.gz``
archives (``reports/`` is skipped). :func:`scan` also takes one scenario folder, one artifact or one archive.
Each artifact is read cheaply: its manifest (schema), its summary and label (schema, and their sha256 against the
manifest, so what is listed is what bench wrote); ``validate=True`` re-checks every file (``bench results
validate``; slower: every file is hashed again). An artifact that cannot be used is listed with its problem.
An archive is extracted safely into a temporary folder first (orchestrator.artifacts.archive).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.artifacts.layout import ARCHIVES, LABEL, MANIFEST, REPORTS, SUMMARY
from orchestrator.artifacts.seal import FileEntry
from orchestrator.errors import BadInput

ARTIFACT_ID = re.compile(r"(?P<stamp>\d{8}T\d{6}Z)-[0-9a-z]+")
ARCHIVE_SUFFIX = ".tar.gz"
LATEST = re.compile(r"latest(?:~(?P<back>\d+))?")
MAX_DOCUMENT_BYTES = 256 << 20


def artifact_time(artifact_id: str) -> datetime | None:
    """The UTC time an artifact id begins with (``20261201T122211Z-e8033e``), None for another name."""
    match = ARTIFACT_ID.fullmatch(artifact_id)
    if not match:
        return None
    return datetime.strptime(match["stamp"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


@dataclass(frozen=True)
class Listed:
    """One artifact found: where, what the manifest and summary say, or the problem that makes it unusable."""

    path: Path  # the folder or the archive
    scenario: str
    artifact_id: str
    archive: bool = False
    label: str | None = None
    summary: Any = None  # orchestrator.judge.summary_model.Summary, when readable
    complete: bool | None = None  # the manifest's flag (false: interrupted or in progress)
    problem: str | None = None  # why the artifact is unusable (None: usable)
    problems: int = 0  # how many problems were found (the first is ``problem``)
    gpus: tuple[str, ...] = ()  # the GPU names of the host bench ran on (summary host, else a run record)

    @property
    def time(self) -> datetime | None:
        return artifact_time(self.artifact_id)

    @property
    def usable(self) -> bool:
        return self.problem is None and self.summary is not None

    @property
    def runs(self) -> tuple[int, int] | None:
        """(ok runs, all runs) of the summary."""
        if self.summary is None:
            return None
        runs = self.summary.runs
        return sum(1 for r in runs if r.status == "ok"), len(runs)

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(sorted({r.engine for r in self.summary.runs})) if self.summary is not None else ()

    @property
    def gpu(self) -> str | None:
        """'NVIDIA H200', '2x NVIDIA H200', 'NVIDIA H200, NVIDIA A100'; None when no GPU was seen."""
        return gpu_text(self.gpus)

    def to_json(self) -> dict[str, Any]:
        runs = self.runs
        time = self.time
        return {"path": str(self.path), "scenario": self.scenario, "artifact_id": self.artifact_id,
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ") if time else None, "archive": self.archive,
                "valid": self.usable, "problem": self.problem, "problem_count": self.problems, "complete": self.complete,
                "smoke": self.summary.smoke if self.summary is not None else None,
                "runs_ok": runs[0] if runs else None, "runs_total": runs[1] if runs else None,
                "engines": list(self.engines), "gpu": self.gpu, "gpus": list(self.gpus), "label": self.label}


def gpu_text(names: tuple[str, ...] | list[str]) -> str | None:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items()) or None


def _listed_document(root: Path, rel: str, listed: dict[str, FileEntry], schema: str) -> Any:
    """A document of the artifact, read without following links, its sha256 and size checked against the manifest and
    its schema; ValueError saying why it is refused."""
    from orchestrator.artifacts.walk import read_bytes_no_follow
    from orchestrator.schemas import SchemaError, validate

    try:
        data = read_bytes_no_follow(root, rel, MAX_DOCUMENT_BYTES)
    except FileNotFoundError:
        raise ValueError(f"{rel}: listed in the manifest but missing") from None
    except OSError as exc:
        raise ValueError(f"{rel}: refused ({exc.strerror or exc}; links are never followed)") from None
    item = listed[rel]
    if len(data) != item.bytes or hashlib.sha256(data).hexdigest() != item.sha256:
        raise ValueError(f"{rel}: sha256 differs from the manifest (modified)")
    try:
        document = json.loads(data)
        validate(document, schema)
    except SchemaError as exc:
        raise ValueError(f"{rel}: does not match the {schema} schema: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{rel}: unreadable ({exc.__class__.__name__})") from None
    return document


def _run_gpus(root: Path, summary: Any) -> tuple[str, ...]:
    """The GPU names one started run recorded (telemetry.gpu.devices), for a summary whose host saw none."""
    from orchestrator.artifacts.layout import RUNS
    from orchestrator.artifacts.walk import read_bytes_no_follow

    for row in summary.runs:
        if row.status == "skipped":
            continue
        try:
            record = json.loads(read_bytes_no_follow(root, f"{RUNS}/{row.run_id}/run.json", MAX_DOCUMENT_BYTES))
            devices = ((record.get("telemetry") or {}).get("gpu") or {}).get("devices") or []
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
        names = tuple(str(d["name"]) for d in devices if isinstance(d, dict) and d.get("name"))
        if names:
            return names
    return ()


def summary_gpus(summary: Any) -> tuple[str, ...]:
    nvml = (summary.host or {}).get("nvml") or {}
    return tuple(str(g["name"]) for g in nvml.get("gpus") or [] if isinstance(g, dict) and g.get("name"))


def read_listed(folder: Path, validate: bool = False) -> Listed:
    """The artifact folder ``folder`` as listed (never raises for a bad artifact: its problem is in the entry)."""
    from orchestrator.artifacts.walk import read_bytes_no_follow
    from orchestrator.judge.summary_model import Summary
    from orchestrator.schemas import SchemaError
    from orchestrator.schemas import validate as validate_document

    entry = Listed(folder, folder.parent.name, folder.name)
    if folder.is_symlink():
        return replace(entry, problem="a symbolic link (never followed)", problems=1)
    try:
        manifest = json.loads(read_bytes_no_follow(folder, MANIFEST, MAX_DOCUMENT_BYTES))
        validate_document(manifest, "manifest")
    except FileNotFoundError:
        return replace(entry, problem=f"not a bench artifact (no {MANIFEST})", problems=1)
    except OSError as exc:
        return replace(entry, problem=f"{MANIFEST}: refused ({exc.strerror or exc}; links are never followed)", problems=1)
    except (ValueError, SchemaError, RecursionError) as exc:
        return replace(entry, problem=f"{MANIFEST}: invalid ({exc})", problems=1)
    # the id is the folder's name (what a command is given); the scenario the manifest's
    entry = replace(entry, scenario=manifest["scenario"], complete=manifest.get("complete", True))
    listed = {item["path"]: FileEntry(item["path"], item["sha256"], item["bytes"]) for item in manifest["files"]}
    problems: list[str] = []
    if SUMMARY in listed:
        try:
            entry = replace(entry, summary=Summary.from_json(_listed_document(folder, SUMMARY, listed, "summary")))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(str(exc) if isinstance(exc, ValueError) else f"{SUMMARY}: unreadable ({exc})")
    elif entry.complete:
        problems.append(f"no {SUMMARY}")
    else:
        problems.append(f"no {SUMMARY} yet: runs in progress, or bench was stopped before the first summary ('bench scenario resume' completes it)")
    if LABEL in listed:
        try:
            entry = replace(entry, label=_listed_document(folder, LABEL, listed, "label")["label"])
        except ValueError as exc:
            problems.append(str(exc))
    if validate:  # every file re-checked: its problems first, then the others the cheap reading found
        from orchestrator.artifacts.validate import validate_artifact

        full = [str(p) for p in validate_artifact(folder)]
        problems = full + [q for q in problems if q.split(":")[0] not in {f.split(":")[0] for f in full}]
    if entry.summary is not None:
        entry = replace(entry, gpus=summary_gpus(entry.summary) or _run_gpus(folder, entry.summary))
    return replace(entry, problem=problems[0] if problems else None, problems=len(problems))


@contextlib.contextmanager
def opened(entry: Listed) -> Iterator[Path]:
    """A readable folder of the listed artifact (an archive extracted safely for the time of the ``with``)."""
    from orchestrator.artifacts.archive import artifact_folder

    with artifact_folder(entry.path) as root:
        yield root


def read_archive(path: Path, validate: bool = False) -> Listed:
    """An archive as listed: extracted safely into a temporary folder, then read like a folder."""
    from orchestrator.artifacts.archive import artifact_folder

    artifact_id = path.name[: -len(ARCHIVE_SUFFIX)] if path.name.endswith(ARCHIVE_SUFFIX) else path.stem
    entry = Listed(path, path.parent.name, artifact_id, archive=True)
    try:
        with artifact_folder(path) as root:
            found = read_listed(root, validate)
    except BadInput as exc:
        return replace(entry, problem=str(exc).replace(f"{path}: ", "", 1), problems=1)
    except OSError as exc:
        return replace(entry, problem=f"unreadable ({exc.strerror or exc})", problems=1)
    return replace(found, path=path, archive=True)


def _is_artifact_name(path: Path) -> bool:
    return (path / MANIFEST).exists() or path.is_symlink() or ARTIFACT_ID.fullmatch(path.name) is not None


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return []


def candidates(root: Path) -> list[tuple[Path, bool]]:
    """(path, is an archive) of every artifact under the results folder ``root`` (or ``root`` itself)."""
    if root.is_file():
        return [(root, True)]
    if (root / MANIFEST).exists():
        return [(root, False)]
    found: list[tuple[Path, bool]] = []

    def scenario_folder(folder: Path) -> None:
        for item in _children(folder):
            if item.is_file() and item.name.endswith(ARCHIVE_SUFFIX):
                found.append((item, True))
            elif (item.is_dir() or item.is_symlink()) and _is_artifact_name(item):
                found.append((item, False))

    if root.name == ARCHIVES:
        for folder in _children(root):
            scenario_folder(folder)
        return found
    scenario_folder(root)  # a scenario folder given itself
    for child in _children(root):
        if child.is_symlink() or not child.is_dir() or _is_artifact_name(child) or child.name == REPORTS:
            continue
        if child.name == ARCHIVES:
            for folder in _children(child):
                if folder.is_dir() and not folder.is_symlink():
                    scenario_folder(folder)
        else:
            scenario_folder(child)
    return found


def newest_first(entries: list[Listed]) -> list[Listed]:
    """Newest first (by the time in the artifact id; names without one last), a folder before its archive."""
    earliest = datetime.min.replace(tzinfo=UTC)
    return sorted(entries, key=lambda e: (e.time or earliest, e.artifact_id, not e.archive, str(e.path)), reverse=True)


def scan(root: Path, scenario: str | None = None, validate: bool = False) -> list[Listed]:
    """Every artifact under ``root`` (see the module), newest first; ``scenario`` keeps that scenario's only."""
    if not root.exists():
        raise BadInput(f"{root}: no such results folder")
    entries = []
    for path, is_archive in candidates(root):
        if scenario is not None and path.parent.name != scenario and not (root == path or root.name == scenario):
            continue  # a cheap first cut by folder name; the manifest's scenario decides below
        entry = read_archive(path, validate) if is_archive else read_listed(path, validate)
        if scenario is None or entry.scenario == scenario:
            entries.append(entry)
    return newest_first(entries)


def is_latest(path: Path) -> bool:
    return not path.exists() and not path.is_symlink() and LATEST.fullmatch(path.name) is not None


def resolve_latest(path: Path, scenario: str | None = None, default_root: Path | None = None) -> Path:
    """``path`` itself, or for ``latest`` / ``latest~N`` (the N-th before the newest) the newest usable artifact:
    under the default results folder (``latest``), a results or scenario folder (``DIR/latest``) or of a scenario
    (``SCENARIO/latest``, under the default results folder); ``scenario`` narrows it. An archive counts only when
    its folder is not there too. BadInput when there is no such artifact."""
    if not is_latest(path):
        return path
    from orchestrator.paths import default_results_dir

    back = int(LATEST.fullmatch(path.name)["back"] or 0)  # type: ignore[index]
    parent = path.parent
    root = default_root or default_results_dir()
    if str(parent) != ".":
        if parent.is_dir():
            root = parent
        elif len(parent.parts) == 1 and scenario in (None, parent.name):
            scenario = parent.name
        else:
            raise BadInput(f"{path}: no such artifact folder or archive ({parent}: no such folder)")
    usable: dict[tuple[str, str], Listed] = {}
    for entry in scan(root, scenario):
        if entry.usable:
            usable.setdefault((entry.scenario, entry.artifact_id), entry)  # newest_first: the folder before its archive
    ordered = list(usable.values())
    if back >= len(ordered):
        where = f"{root}" + (f" for scenario {scenario}" if scenario else "")
        raise BadInput(f"{path}: {len(ordered)} usable artifact(s) under {where}"
                       + (f", no {path.name}" if ordered else "") + " (see 'bench results list')")
    return ordered[back].path
