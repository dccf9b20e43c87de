"""Resume an artifact: run again, into the same artifact, every run that has no valid result.

The runs are those of the matrix of the artifact's resolved ``scenario.yaml`` (re-expanded:
a run that never got a folder, because bench was killed before it started, is run too) plus
any other run folder the artifact has. A run is kept when its record says ``ok`` and its
``result.json`` is there and matches the schema, or when it was skipped for good (its engine
does not support the precision, or its maximal batch search failed). Every other run (failed,
invalid, timeout, interrupted, skipped because the scenario was interrupted, a folder without a
record at all, or no folder) is run with its plan, from that ``scenario.yaml`` and the smoke flag
the artifact's specs (or summary) record. A scenario with a maximal batch search takes each
run's batch from its ``maxbatch/*/search.json``; a search that never finished is made again, taking over
the probes that fitted or ran out of memory from its sealed ``probes.json`` (orchestrator.run.maxbatch).

A run without a record that its runtime can still follow (``Runtime.reattach``: a Slurm job an earlier,
killed bench left queued or running, or that ended with its result) keeps its folder and is followed to
its end, not started again.

The old folder of a re-run is moved aside, whole, to ``attempts/<run id>/<N>/`` (N = 1, 2, ...),
so ``runs/`` keeps exactly one folder per run and earlier attempts stay in the artifact (and in its
manifest) for inspection. A document of an old attempt that no longer matches its schema (a
truncated result file, say) is renamed ``<name>.rejected`` so that the artifact still validates.
Summary and manifest are rebuilt at the end; the cross-engine parity check covers old and new runs.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bench_engine.contract import EngineResult, RunSpec
from orchestrator.artifacts import Artifact, open_artifact, seal, write_manifest
from orchestrator.artifacts.layout import MANIFEST, RUN_ID, RUNS, SCENARIO, SCHEMA_OF, SUMMARY
from orchestrator.engines.registry import discover
from orchestrator.errors import BadInput
from orchestrator.judge.record import RunRecord
from orchestrator.judge.runtime_use import gpu_field
from orchestrator.run.finish import Outcome, Reporter
from orchestrator.run.gpu_model import check_same_gpu_model, recorded_gpu_models
from orchestrator.run.maxbatch import MAXBATCH_DIR, PROBES_FILE, SEARCH_FILE, ProbeOutcome, read_recorded_probes, resolve_max_batch
from orchestrator.run.runtime_choice import ChosenRuntime
from orchestrator.scenario import RunPlan, Scenario, expand, load_scenario
from orchestrator.schemas import SchemaError, validate

ATTEMPTS = "attempts"
T = TypeVar("T")


@dataclass
class RunState:
    """One run of the artifact (its folder may not exist yet) and what resume will do with it."""

    plan: RunPlan
    folder: Path
    record: RunRecord | None
    result: EngineResult | None
    spec: RunSpec | None
    keep: bool
    why: str  # why it is kept / run again


@dataclass
class ResumePlan:
    artifact: Artifact
    scenario: Scenario
    runs: list[RunState]
    device: str
    runtime: str
    unsearched: list[RunPlan] = dataclasses.field(default_factory=list)  # runs whose maximal batch is still to search
    # folders of runs planned at the scenario's placeholder batch before their search finished: moved aside, never
    # run (the search runs again and its runs take the batch it chooses)
    superseded: list[RunState] = dataclasses.field(default_factory=list)
    finished: bool = True  # summary and a complete manifest written (else resume rewrites them, even with nothing to run)

    @property
    def nothing_to_do(self) -> bool:
        return not self.to_run and not self.unsearched and self.finished

    @property
    def to_run(self) -> list[RunState]:
        return [r for r in self.runs if not r.keep]

    @property
    def kept(self) -> list[RunState]:
        return [r for r in self.runs if r.keep]


def _read_json(path: Path, schema: str) -> dict[str, Any] | None:
    """The file's document when it matches ``schema`` (else None): the file boundary of every read below."""
    try:
        document = json.loads(path.read_text())
        validate(document, schema)
    except (OSError, ValueError, SchemaError):
        return None
    return document


def _read(path: Path, schema: str, kind: Callable[[Any], T]) -> T | None:
    """The file as ``kind`` (RunRecord, RunSpec, EngineResult) when it matches ``schema``, else None."""
    document = _read_json(path, schema)
    try:
        return kind(document) if document is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def _plan_of(folder: Path, record: RunRecord | None, spec: RunSpec | None) -> RunPlan | None:
    if record is not None:
        return RunPlan(record.engine, record.precision, record.path, record.batch_per_device, record.devices, record.repeat)
    if spec is not None:
        parity = spec.parity
        return RunPlan(spec.engine, parity.precision, spec.path, parity.batch.per_device, parity.devices, spec.repeat)
    match = RUN_ID.match(folder.name)
    if match is None:
        return None
    g = match.groupdict()
    return RunPlan(g["engine"], g["precision"], g["path"], int(g["batch"]), int(g["devices"]), int(g["repeat"]))


def _with_skip(plan: RunPlan) -> RunPlan:
    """The plan as expand() makes it: a precision its engine lacks is skipped for good."""
    engine = discover().get(plan.engine)
    if engine is None:
        raise BadInput(f"runs/{plan.run_id}: unknown engine '{plan.engine}' (known: {', '.join(sorted(discover()))})")
    if plan.precision not in engine.precisions:
        return RunPlan(plan.engine, plan.precision, plan.path, plan.batch, plan.devices, plan.repeat,
                       f"engine '{plan.engine}' does not support precision {plan.precision}")
    return plan


def _order(scenario: Scenario, plan: RunPlan) -> tuple:
    """expand()'s order: repeat, engine, precision, path, batch, devices (matrix order)."""
    matrix = scenario.matrix

    def index(axis: tuple[str, ...], value: str) -> int:
        return axis.index(value) if value in axis else len(axis)

    return (plan.repeat, index(matrix.engines, plan.engine), index(matrix.precisions, plan.precision),
            index(matrix.paths, plan.path), plan.batch, plan.devices)


def _load_scenario(artifact: Artifact, smoke: bool) -> Scenario:
    path = artifact.root / SCENARIO
    if not path.is_file():
        raise BadInput(f"{artifact.root}: no {SCENARIO} in the artifact")
    # The document is already resolved (smoke block and --set applied): load it as it is.
    return dataclasses.replace(load_scenario(str(path)), smoke=smoke)


def _searched_batches(artifact: Artifact) -> dict[tuple[str, str, str, int], int | None]:
    """(engine, precision, path, devices) -> chosen batch (None: the search failed) of every finished search."""
    found: dict[tuple[str, str, str, int], int | None] = {}
    for path in sorted((artifact.root / MAXBATCH_DIR).glob(f"*/{SEARCH_FILE}")):
        search = _read_json(path, "maxbatch")
        if search is not None:
            found[(search["engine"], search["precision"], search["path"], search["devices"])] = search["chosen_batch"]
    return found


def _search_key(plan: RunPlan) -> tuple[str, str, str, int]:
    """The maximal batch search a run's batch comes from (one per engine, precision, path and device count)."""
    return plan.engine, plan.precision, plan.path, plan.devices


def expected_plans(artifact: Artifact, scenario: Scenario) -> tuple[list[RunPlan], list[RunPlan]]:
    """The matrix of the artifact's scenario: (plans with their batch known, plans whose maximal batch is still to search)."""
    plans = expand(scenario)
    if not scenario.workload.batch.max_search:
        return plans, []
    searched = _searched_batches(artifact)
    known, unsearched = [], []
    for plan in plans:
        key = _search_key(plan)
        if plan.skip_reason:
            known.append(plan)
        elif key not in searched:
            unsearched.append(plan)
        elif searched[key] is None:
            known.append(dataclasses.replace(plan, skip_reason="maximal batch search failed (see maxbatch/)"))
        else:
            known.append(dataclasses.replace(plan, batch=searched[key]))
    return known, unsearched


def _state(run_dir: Path, plan: RunPlan, spec: RunSpec | None, sealed: set[str]) -> RunState:
    """What resume does with the run of ``run_dir`` (which may not exist); ``sealed``: the files the
    manifest lists (a run is kept only on files bench sealed, never on what an interrupted run left)."""
    record = _read(run_dir / "run.json", "run-record", RunRecord.from_json) if run_dir.is_dir() else None
    result = None
    rel = f"{RUNS}/{run_dir.name}"
    if run_dir.is_dir() and record is not None and f"{rel}/run.json" not in sealed:
        keep, why = False, "its record was never sealed in the manifest (an interrupted run; not adopted)"
    elif not run_dir.is_dir():
        keep, why = bool(plan.skip_reason), f"skipped: {plan.skip_reason}" if plan.skip_reason else "never started"
    elif record is None:
        keep, why = False, "no run record"
    elif record.status == "ok":
        result = _read(run_dir / "result.json", "engine-result", EngineResult.from_json)
        keep, why = (True, "ok") if result is not None else (False, "recorded ok but its result is missing or invalid")
        if result is not None and f"{rel}/result.json" not in sealed:
            keep, why = False, "recorded ok but its result was never sealed in the manifest (not adopted)"
    elif record.status == "skipped" and plan.skip_reason:
        keep, why = True, f"skipped: {plan.skip_reason}"
    else:
        keep, why = False, record.status + (f": {record.reason}" if record.reason else "")
    return RunState(plan, run_dir, record, result, spec, keep, why)


def _runtime_used(runs: list[RunState], run_dirs: list[Path]) -> str:
    """The runtime the artifact's runs used: the one most records name, else the one whose in-flight files
    (``Runtime.in_flight_file``: a Slurm job's) its run folders hold, else auto."""
    used = Counter(r.record.runtime["name"] for r in runs if r.record and r.record.runtime.get("name") not in (None, "none"))
    if used:
        return used.most_common(1)[0][0]
    from orchestrator.runtimes import get_runtime, runtime_names

    for name in runtime_names():
        marker = get_runtime(name).in_flight_file
        if marker and any((folder / marker).is_file() for folder in run_dirs):
            return name
    return "auto"


def plan_resume(folder: Path, runtime: str | None = None, device: str | None = None) -> ResumePlan:
    """Read the artifact and decide which runs to keep and which to run (changes nothing)."""
    artifact = open_artifact(folder)
    manifest = _read_json(artifact.root / MANIFEST, "manifest") or {}
    sealed = {item["path"] for item in manifest.get("files") or []}
    run_dirs = artifact.run_dirs()
    specs = {d: _read(d / "spec.json", "run-spec", RunSpec.from_json) for d in run_dirs}
    any_spec = next((s for s in specs.values() if s), None)
    if any_spec is not None:
        smoke, recorded_device = any_spec.smoke, any_spec.device
    else:
        summary = _read_json(artifact.root / SUMMARY, "summary") or {}
        smoke, recorded_device = bool(summary.get("smoke")), "auto"
    scenario = _load_scenario(artifact, smoke)
    known, unsearched = expected_plans(artifact, scenario)
    runs: list[RunState] = []
    superseded: list[RunState] = []
    searching = {_search_key(p) for p in unsearched}
    seen: set[str] = set()
    for run_dir in run_dirs:
        plan = _plan_of(run_dir, _read(run_dir / "run.json", "run-record", RunRecord.from_json), specs[run_dir])
        if plan is None:
            raise BadInput(f"{run_dir}: neither a run record nor a spec, and '{run_dir.name}' is not a run id")
        expected = next((p for p in known if p.run_id == plan.run_id), None)
        plan = expected or _with_skip(plan)
        state = _state(run_dir, plan, specs[run_dir], sealed)
        if expected is None and not plan.skip_reason and _search_key(plan) in searching:
            superseded.append(dataclasses.replace(state, why="planned before its maximal batch search finished; "
                                                             "the search runs again and its runs take the batch it finds"))
            continue
        runs.append(state)
        seen.add(plan.run_id)
    for plan in known:
        if plan.run_id not in seen:
            runs.append(_state(artifact.run_dir(plan.run_id), plan, None, sealed))
    runs.sort(key=lambda r: _order(scenario, r.plan))
    if runtime is None:
        runtime = _runtime_used(runs, run_dirs)
    if not runs and not unsearched:
        raise BadInput(f"{folder}: the artifact's scenario has no runs")
    finished = bool(manifest.get("complete")) and (artifact.root / SUMMARY).is_file()
    return ResumePlan(artifact, scenario, runs, device or recorded_device, runtime, unsearched, superseded, finished)


def next_attempt(artifact: Artifact, run_id: str) -> Path:
    base = artifact.root / ATTEMPTS / run_id
    n = 1
    while (base / str(n)).exists():
        n += 1
    return base / str(n)


def _rel(artifact: Artifact, path: Path) -> str:
    return path.relative_to(artifact.root).as_posix()


UNSEALED = ".unsealed"  # suffix of a moved attempt's file the manifest never sealed: kept as evidence, never read as a record


def move_aside(artifact: Artifact, folder: Path, name: str, sealed: set[str] | None = None) -> Path:
    """Move an old run (or probe) folder to attempts/<name>/<N>/; documents that fail their schema get '.rejected'.

    With ``sealed`` (the paths the manifest lists), every file of the folder bench never sealed (what an interrupted
    run left, or anything copied into its folder since) is renamed ``<name>.unsealed``: kept as evidence under a
    name no schema or reader applies to, so a forged record can never pass for bench's."""
    unsealed = [] if sealed is None else [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
                                          and _rel(artifact, p) not in sealed]
    target = next_attempt(artifact, name)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder), str(target))
    seal.moved(artifact.root, _rel(artifact, folder), _rel(artifact, target))
    for path in unsealed:
        moved = target / path.relative_to(folder)
        moved.rename(moved.with_name(moved.name + UNSEALED))
    for name, schema in SCHEMA_OF.items():
        path = target / name
        if path.is_file() and _read_json(path, schema) is None:
            path.rename(path.with_name(path.name + ".rejected"))
            seal.moved(artifact.root, _rel(artifact, path), _rel(artifact, path) + ".rejected")
    return target


def check_resume_host(plan: ResumePlan) -> None:
    """Refuse, before anything is written (the label included), a host whose GPUs are another model than the
    artifact's runs ran on (:mod:`orchestrator.run.gpu_model`); the CLI calls it before :func:`resume`."""
    from orchestrator.host.gpus import nvml_snapshot

    if plan.device != "cpu":
        check_same_gpu_model(str(plan.artifact.root), _models_used(plan), nvml_snapshot(), plan.device)


def _models_used(plan: ResumePlan) -> frozenset[str]:
    """The GPU models the artifact's run records name, else those of its summary's host."""
    used = frozenset(name for r in plan.runs if r.record is not None for name in gpu_field(r.record, "name"))
    return used or recorded_gpu_models(_read_json(plan.artifact.root / SUMMARY, "summary"))


def resume(plan: ResumePlan, settings: dict[str, Any], reporter: Reporter, forced: bool = False) -> Outcome:
    """Run ``plan.to_run`` into the artifact, keeping the valid runs; returns the executor's Outcome.
    The seals start from the manifest (checked by the caller), or from the files as they are when
    ``forced`` (a resume forced over integrity problems, recorded in integrity.json)."""
    from orchestrator.run.execute import RunOptions, note_dataset, prepare_dataset, prepare_runtimes, run_plans

    scenario, artifact = plan.scenario, plan.artifact
    seal.start(artifact.root, trust_current=forced)
    todo = plan.to_run
    engines = sorted({r.plan.engine for r in todo if not r.plan.skip_reason} | {p.engine for p in plan.unsearched})
    options = RunOptions(runtime=plan.runtime, device=plan.device, out_root=artifact.root.parent.parent, settings=settings)
    gpus, runtimes = prepare_runtimes(scenario, engines, options, reporter)
    split = prepare_dataset(scenario)
    recorded = {r.spec.parity.dataset.sha256 for r in plan.runs if r.spec}
    if recorded and recorded != {split.sha256}:
        raise BadInput(f"{artifact.root}: the dataset changed since the artifact was made "
                       f"(sha256 {split.sha256[:12]} now, {', '.join(sorted(s[:12] for s in recorded))} then); start a new run")
    note_dataset(split, reporter)
    attached = reattach(plan, runtimes, split.path, reporter)  # jobs an earlier bench left in flight: followed, not resubmitted
    staying = [_rel(artifact, run.folder) for run in todo if run.plan.run_id in attached]
    unfinished = [f for f in sorted((artifact.root / MAXBATCH_DIR).glob("*")) if f.is_dir() and not (f / SEARCH_FILE).is_file()]
    moving = [run.folder for run in todo if run.folder.is_dir() and run.plan.run_id not in attached] + unfinished
    moving += [run.folder for run in plan.superseded]
    # what the manifest sealed, read before the folders that move are declared in flight (then unlisted)
    listed = None if forced else {item["path"] for item in (_read_json(artifact.root / MANIFEST, "manifest") or {}).get("files") or []}
    # killed while moving, the artifact still validates: what moves, and where to, is in flight
    write_manifest(artifact, complete=False, in_flight_folders=[_rel(artifact, f) for f in moving] + [ATTEMPTS] + staying)
    for run in todo:
        if run.plan.run_id in attached:
            continue
        if run.folder.is_dir():
            moved = move_aside(artifact, run.folder, run.plan.run_id, listed)
            reporter.note(f"{run.plan.run_id}: {run.why}; old attempt moved to {moved.relative_to(artifact.root).as_posix()}")
        else:
            reporter.note(f"{run.plan.run_id}: {run.why}")
    for run in plan.superseded:
        moved = move_aside(artifact, run.folder, run.plan.run_id, listed)
        reporter.note(f"{run.plan.run_id}: {run.why}; moved to {moved.relative_to(artifact.root).as_posix()}")
    recorded: dict[str, dict[int, ProbeOutcome]] = {}
    for folder in unfinished:  # a maximal batch search cut short: made again, taking over the probes its sealed probes.json lists
        sealed_probes = listed is None or f"{_rel(artifact, folder)}/{PROBES_FILE}" in listed
        moved = move_aside(artifact, folder, f"{MAXBATCH_DIR}-{folder.name}", listed)
        if sealed_probes and scenario.workload.batch.max_search is not None:
            recorded[folder.name] = read_recorded_probes(folder.name, moved, _rel(artifact, moved),
                                                          scenario.workload.batch.max_search)
    write_manifest(artifact, complete=False, in_flight_folders=([MAXBATCH_DIR] if plan.unsearched else []) + staying)
    previous = [(r.record, r.result) for r in plan.kept if r.record is not None]
    plans = [r.plan for r in todo]
    interrupted = False
    if plan.unsearched:
        try:
            plans += resolve_max_batch(artifact, scenario, plan.unsearched, split, runtimes, plan.device, reporter, recorded)
        except KeyboardInterrupt:
            plans, interrupted = plans + plan.unsearched, True
        plans.sort(key=lambda p: _order(scenario, p))
    return run_plans(artifact, scenario, plans, split, runtimes, options, reporter, gpus, previous=previous, interrupted=interrupted,
                     resumed=frozenset(attached))


def reattach(plan: ResumePlan, runtimes: Mapping[str, ChosenRuntime], dataset: Path, reporter: Reporter) -> set[str]:
    """The runs to run again whose earlier attempt their runtime can still follow (``Runtime.reattach``: a Slurm job
    still queued or running, or ended with its result): their folders stay, and no new attempt starts."""
    from orchestrator.engines.registry import get_engine
    from orchestrator.run.attempt import run_paths

    attached = set()
    for run in plan.to_run:
        chosen = runtimes.get(run.plan.engine)
        if chosen is None or run.plan.skip_reason or run.record is not None or run.spec is None:
            continue  # a run with a record ended in an earlier bench: nothing of it is in flight
        note = chosen.runtime.reattach(get_engine(run.plan.engine), run_paths(run.folder, dataset), chosen.settings)
        if note is not None:
            attached.add(run.plan.run_id)
            reporter.note(f"{run.plan.run_id}: {note}")
    return attached
