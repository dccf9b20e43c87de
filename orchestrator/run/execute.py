"""Execute a scenario: dataset once, every run through its runtime, checks, records, summary, manifest."""

from __future__ import annotations

import copy
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench_engine.contract import EngineResult
from orchestrator import signals
from orchestrator.artifacts import Artifact, create_artifact, write_manifest
from orchestrator.artifacts.label import write_label
from orchestrator.artifacts.layout import SCENARIO
from orchestrator.clock import utc_now
from orchestrator.data import PreparedSplit, prepare_split
from orchestrator.engines.registry import EngineInfo, get_engine
from orchestrator.errors import BadInput
from orchestrator.host.gpus import NvmlSnapshot
from orchestrator.host.provenance import run_host
from orchestrator.host.telemetry import GpuTelemetry
from orchestrator.jsonio import write_text_atomic
from orchestrator.judge.record import RunRecord
from orchestrator.model.initweights import INIT_DIR, shared_init
from orchestrator.run.attempt import RunMonitor, run_attempt
from orchestrator.run.concurrent import in_flight_limit, run_concurrently
from orchestrator.run.finish import Outcome, Reporter, attempt_record, finish, new_record, write_record
from orchestrator.run.maxbatch import MAXBATCH_DIR, resolve_max_batch
from orchestrator.run.runlength import cpu_run_warning
from orchestrator.run.runtime_choice import ChosenRuntime
from orchestrator.runtimes import Runtime, RuntimeFacts, RuntimeSettings, get_runtime, runtime_names
from orchestrator.scenario import RunPlan, Scenario
from orchestrator.scenario.matrix import build_spec, check_plans

STAGING = ".staging"  # <out>/<scenario>/.staging/<id>/: an artifact being made (renamed into place when whole)


# Factories of the monitors attached to every run (started before the engine, stopped after it).
MONITORS: list[Callable[[], RunMonitor]] = [GpuTelemetry]


@dataclass
class RunOptions:
    runtime: str = "auto"
    device: str = "auto"
    out_root: Path = Path("results")
    settings: dict[str, Any] = field(default_factory=dict)  # runtime settings (interpreter, env...)
    label: str | None = None  # the artifact's label (label.json, orchestrator.artifacts.label)


def auto_runtime(engine: EngineInfo, settings: RuntimeSettings) -> tuple[Runtime, str]:
    """``--runtime auto`` for one engine: docker when it can run the engine now, else local; and why."""
    if "docker" not in runtime_names():
        return get_runtime("local"), "no docker runtime installed"
    docker = get_runtime("docker")
    ok, why = docker.availability(engine, settings)
    return (docker, why) if ok else (get_runtime("local"), f"docker: {why}")


def choose_runtimes(
    engines: list[str], requested: str, settings_for: dict[str, RuntimeSettings], reporter: Reporter
) -> dict[str, ChosenRuntime]:
    """Pick and check the runtime of every engine; BadInput when one cannot run. ``auto`` says what it chose in one line."""
    from orchestrator.run.runtime_choice import RuntimeChoice, choice_line, lock_note

    chosen: dict[str, ChosenRuntime] = {}
    choices: list[RuntimeChoice] = []
    for name in engines:
        engine = get_engine(name)
        settings = settings_for[name]
        runtime, why = auto_runtime(engine, settings) if requested == "auto" else (get_runtime(requested), "")
        info = runtime.check(engine, settings)
        chosen[name] = ChosenRuntime(runtime, settings.with_checked(info))
        if requested == "auto":
            image_id = info.image_facts.image_id if info.image_facts else None
            choices.append(RuntimeChoice(name, runtime.name, why + (lock_note(name, image_id) if runtime.name == "docker" else "")))
    if choices:
        reporter.note(choice_line(choices))
    return chosen


def merge_runtime_block(scenario: Scenario, settings: dict[str, Any]) -> dict[str, Any]:
    """Settings with the scenario's ``runtime.<name>`` blocks under them (command-line values win)."""
    merged = dict(settings)
    for name, block in scenario.runtime.items():
        merged[name] = {**block, **(settings.get(name) or {})}
    return merged


def check_device(device: str) -> NvmlSnapshot:
    """--device cuda needs a GPU that NVML can see; returns the NVML snapshot."""
    from orchestrator.host.gpus import nvml_snapshot

    snapshot = nvml_snapshot()
    if device == "cuda" and not snapshot.gpus:
        raise BadInput(f"--device cuda: no GPU found ({snapshot.reason or 'NVML reports 0 devices'})")
    return snapshot


def engine_runtime_settings(scenario: Scenario, engine: str, options: RunOptions) -> RuntimeSettings:
    """One engine's runtime settings: the command line over the scenario (its ``runtime.<name>`` blocks and the
    engine's ``engines.<name>`` interpreter and image) over the environment."""
    given = {**scenario.engine_block(engine).runtime_settings(), **merge_runtime_block(scenario, options.settings)}
    return RuntimeSettings.from_blocks({**given, "device": options.device})


def prepare_runtimes(scenario: Scenario, engines: list[str], options: RunOptions,
                     reporter: Reporter) -> tuple[NvmlSnapshot, dict[str, ChosenRuntime]]:
    """(NVML snapshot, engine -> (runtime, settings)): the device and every engine's runtime checked before any run."""
    settings_for = {name: engine_runtime_settings(scenario, name, options) for name in engines}
    gpus = check_device(options.device)
    return gpus, choose_runtimes(engines, options.runtime, settings_for, reporter)


def note_dataset(split: PreparedSplit, reporter: Reporter) -> None:
    reporter.note(f"dataset {split.name}/{split.split}: {split.samples} samples, sha256 {split.sha256[:12]}"
                  + (" (synthetic)" if split.synthetic else ""))


def prepare_dataset(scenario: Scenario) -> PreparedSplit:
    workload = scenario.workload
    dataset = workload.dataset
    return prepare_split(dataset.name, dataset.source, dataset.split, dataset.samples, workload.input.hwc,
                         workload.model.num_classes, workload.seed)


def _run_one(artifact: Artifact, scenario: Scenario, plan: RunPlan, split: PreparedSplit, engine: EngineInfo,
             chosen: ChosenRuntime, device: str, reporter: Reporter) -> tuple[RunRecord, EngineResult | None]:
    run_dir = artifact.run_dir(plan.run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not plan.skip_reason:  # killed from here on, the artifact still validates (this run's folder is in flight)
        flying = [run_dir.relative_to(artifact.root).as_posix()]
        if not (artifact.root / INIT_DIR).exists():  # the shared weights are written with this run's spec
            flying.append(INIT_DIR)
        write_manifest(artifact, complete=False, in_flight_folders=flying)
    started, clock = utc_now(), time.monotonic()
    runtime_info = chosen.settings.checked or RuntimeFacts(chosen.runtime.name)
    if plan.skip_reason:
        record = new_record(plan, "skipped", plan.skip_reason, runtime_info.to_json(), started, 0.0)
        write_record(artifact, record)
        return record, None
    host = run_host()  # the load average before the shared weights and the engine load the CPUs
    init = shared_init(artifact.root, scenario.workload.to_json(), run_dir)  # parity: every engine starts from these weights
    done = run_attempt(run_dir, split, chosen.runtime, engine, chosen.settings,
                       lambda dataset_path: build_spec(scenario, plan, split, dataset_path, device, init),
                       reporter.engine_line, [factory() for factory in MONITORS])
    record = attempt_record(plan, done, runtime_info, started, time.monotonic() - clock, host)  # and the load average as it ended
    write_record(artifact, record)
    return record, done.judgement.result


def run_scenario(scenario: Scenario, plans: list[RunPlan], options: RunOptions, reporter: Reporter) -> Outcome:
    engines = sorted({p.engine for p in plans if not p.skip_reason})
    gpus, runtimes = prepare_runtimes(scenario, engines, options, reporter)
    split = prepare_dataset(scenario)
    note_dataset(split, reporter)
    check_plans(scenario, plans, split, options.device, before_search=True)  # every spec valid before the first run
    cpu_warning = cpu_run_warning(scenario, plans, split.samples, options.device, options.runtime, gpus)
    if cpu_warning:
        reporter.warn(cpu_warning)
    artifact = new_artifact(options.out_root, scenario, plans, options.label)
    try:
        plans = resolve_max_batch(artifact, scenario, plans, split, runtimes, options.device, reporter)
    except KeyboardInterrupt:
        # Interrupted before any run: a valid, incomplete artifact that `bench scenario resume` completes.
        return run_plans(artifact, scenario, plans, split, runtimes, options, reporter, gpus, interrupted=True)
    except OSError as exc:
        raise artifact_write_error(artifact, exc) from None
    check_plans(scenario, plans, split, options.device)  # the searched batch sizes too
    return run_plans(artifact, scenario, plans, split, runtimes, options, reporter, gpus)


def new_artifact(out_root: Path, scenario: Scenario, plans: list[RunPlan], label: str | None = None) -> Artifact:
    """The artifact folder with its scenario.yaml and first manifest. It appears whole or not at all
    (made under ``<scenario>/.staging/`` and renamed), so even a SIGKILL leaves no folder without a manifest."""
    staged = create_artifact(out_root / scenario.name, STAGING)
    artifact = Artifact(out_root / scenario.name / staged.artifact_id, scenario.name, staged.artifact_id)
    try:
        write_text_atomic(staged.root / SCENARIO, yaml.safe_dump(recorded_document(scenario, plans), sort_keys=False))
        if label:
            write_label(staged.root, label)
        flying = [MAXBATCH_DIR] if scenario.workload.batch.max_search else None
        write_manifest(Artifact(staged.root, scenario.name, staged.artifact_id), complete=False, in_flight_folders=flying)
        staged.root.rename(artifact.root)
    except OSError as exc:  # nothing measured yet: no artifact rather than half of one
        shutil.rmtree(staged.root, ignore_errors=True)
        raise BadInput(f"--out {out_root}: cannot write the artifact: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        shutil.rmtree(staged.root, ignore_errors=True)
        raise
    finally:
        try:
            staged.root.parent.rmdir()  # .staging, when no other bench is making an artifact there
        except OSError:
            pass
    return artifact


def recorded_document(scenario: Scenario, plans: list[RunPlan]) -> dict[str, Any]:  # the YAML document, as written
    """The scenario as the artifact records it: resolved, its matrix narrowed to the runs chosen
    (--engines, --precisions, --repeats, --devices), so that resume re-expands exactly this matrix."""
    document = copy.deepcopy(scenario.document)
    matrix = document.setdefault("matrix", {})
    engines = {p.engine for p in plans}
    precisions = {p.precision for p in plans}
    matrix["engines"] = [e for e in matrix.get("engines") or [] if e in engines] or sorted(engines)
    matrix["precisions"] = [q for q in matrix.get("precisions") or [] if q in precisions] or sorted(precisions)
    repeats = max((p.repeat for p in plans), default=1)
    if repeats != (matrix.get("repeats") or 1):
        matrix["repeats"] = repeats
    devices = sorted({p.devices for p in plans})
    if devices != (matrix.get("devices") or [1]) and devices:
        matrix["devices"] = devices
    return document


def run_plans(artifact: Artifact, scenario: Scenario, plans: list[RunPlan], split: PreparedSplit,
              runtimes: dict[str, ChosenRuntime], options: RunOptions, reporter: Reporter,
              gpus: NvmlSnapshot, previous: list[tuple[RunRecord, EngineResult | None]] | None = None,
              interrupted: bool = False, resumed: frozenset[str] = frozenset()) -> Outcome:
    """Run ``plans`` into ``artifact``; ``previous`` (record, result) pairs are kept and summarised too.

    Runtimes that can have several runs in flight (``Runtime.max_in_flight``: slurm) run them all at once
    (``orchestrator.run.concurrent``; ``resumed``: runs whose earlier job resume reattached); the others
    run one after another, in order.

    A SIGINT/SIGTERM/SIGHUP (a KeyboardInterrupt, see orchestrator.signals) anywhere in a run ends
    it as interrupted; the runs not started are recorded as skipped, and summary and manifest
    (complete: false) are written all the same. ``interrupted`` says the scenario was interrupted
    before its first run. A file of the artifact that cannot be written (disk full) stops the
    scenario with a one-line error (BadInput); every file is written atomically and the run in
    flight is declared in the manifest, so what is there still validates and resume completes it.
    """
    try:
        return _run_plans(artifact, scenario, plans, split, runtimes, options, reporter, gpus, previous, interrupted, resumed)
    except OSError as exc:
        raise artifact_write_error(artifact, exc) from None


def artifact_write_error(artifact: Artifact, exc: OSError) -> BadInput:
    where = f" ({exc.filename})" if exc.filename else ""
    return BadInput(f"{artifact.root}: cannot write the artifact: {exc.strerror or exc}{where}; the runs recorded so far are kept "
                    f"and the artifact validates; make room, then run 'bench scenario resume {artifact.root}'")


def _run_plans(artifact: Artifact, scenario: Scenario, plans: list[RunPlan], split: PreparedSplit,
               runtimes: dict[str, ChosenRuntime], options: RunOptions, reporter: Reporter,
               gpus: NvmlSnapshot, previous: list[tuple[RunRecord, EngineResult | None]] | None,
               interrupted: bool, resumed: frozenset[str]) -> Outcome:
    records: list[RunRecord] = [record for record, _ in previous or []]
    results: dict[str, EngineResult] = {record.run_id: result for record, result in previous or [] if result is not None}
    interrupted = interrupted or signals.received() is not None
    if not interrupted and in_flight_limit(plans, runtimes) != 1:
        try:
            done, found, interrupted = run_concurrently(artifact, scenario, plans, split, runtimes, options.device, reporter, resumed)
        except KeyboardInterrupt:  # after the runs landed, before they were returned: a valid artifact all the same
            return finish(artifact, scenario, records, results, reporter, gpus, True)
        records += done
        results.update(found)
        plans = []
    for index, plan in enumerate(plans, 1):
        interrupted = interrupted or signals.received() is not None  # e.g. a signal during a max-batch probe
        if interrupted:
            record = new_record(plan, "skipped", "not started: the scenario was interrupted", {"name": "none"}, utc_now(), 0.0)
            artifact.run_dir(plan.run_id).mkdir(parents=True, exist_ok=True)
            write_record(artifact, record)
            records.append(record)
            continue
        record = _run_reported(artifact, scenario, plan, (index, len(plans)), split, runtimes, options, reporter, records, results)
        interrupted = record.status == "interrupted" or signals.received() is not None
    try:
        return finish(artifact, scenario, records, results, reporter, gpus, interrupted)
    except KeyboardInterrupt:  # the first signal came while finishing: finish again (no second one can interrupt)
        return finish(artifact, scenario, records, results, reporter, gpus, True)


def _run_reported(artifact: Artifact, scenario: Scenario, plan: RunPlan, position: tuple[int, int], split: PreparedSplit,
                  runtimes: dict[str, ChosenRuntime], options: RunOptions, reporter: Reporter,
                  records: list[RunRecord], results: dict[str, EngineResult]) -> RunRecord:
    """Run one plan, told to the reporter; its record (and result) appended to ``records`` (``results``)."""
    chosen = runtimes.get(plan.engine) or ChosenRuntime(get_runtime("local"), RuntimeSettings())
    started = utc_now()
    try:
        reporter.run_started(*position, plan)
        record, result = _run_one(artifact, scenario, plan, split, get_engine(plan.engine), chosen, options.device, reporter)
        if result is not None:
            results[plan.run_id] = result
        records.append(record)
        reporter.run_finished(record)
        write_manifest(artifact, complete=False)
    except KeyboardInterrupt as exc:
        # A signal outside the engine's own wait (writing the spec, reading the result, the manifest).
        if not records or records[-1].run_id != plan.run_id:
            record = new_record(plan, "interrupted", signals.interrupt_reason(exc), {"name": chosen.runtime.name}, started, 0.0)
            write_record(artifact, record)
            records.append(record)
            reporter.run_finished(record)
    return records[-1]
