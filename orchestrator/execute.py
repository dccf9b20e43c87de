"""Execute a scenario: dataset once, every run through its runtime, checks, records, summary, manifest."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from orchestrator.artifacts import Artifact, create_artifact, write_manifest
from orchestrator.artifacts.layout import SCENARIO, SUMMARY, utc_now
from orchestrator.data import PreparedSplit, prepare_split
from orchestrator.engines import EngineInfo, get_engine
from orchestrator.errors import BadInput
from orchestrator.hostinfo import host_facts
from orchestrator.jsonio import read_json, write_json, write_text_atomic
from orchestrator.maxbatch import MAXBATCH_DIR, SEARCH_FILE, resolve_max_batch
from orchestrator.parity import check_against_spec, cross_engine
from orchestrator.runtimes import Execution, RunPaths, Runtime, get_runtime, runtime_names
from orchestrator.scenario import RunPlan, Scenario
from orchestrator.scenario.matrix import build_spec
from orchestrator.schemas import SchemaError, validate
from orchestrator.summary import summarize
from orchestrator.telemetry import GpuTelemetry

REJECTED_RESULT = "result.rejected.json"


class RunMonitor(Protocol):
    """Observes one run (e.g. GPU telemetry): started before the engine, stopped after it."""

    name: str

    def start(self, run_dir: Path, settings: dict[str, Any]) -> None: ...
    def stop(self) -> dict[str, Any]: ...


# Factories of the monitors attached to every run; modules register themselves here.
MONITORS: list[Callable[[], RunMonitor]] = [GpuTelemetry]


class Reporter(Protocol):
    """What the executor tells the user interface."""

    def note(self, message: str) -> None: ...
    def run_started(self, index: int, total: int, plan: RunPlan) -> None: ...
    def engine_line(self, line: str) -> None: ...
    def run_finished(self, record: dict[str, Any]) -> None: ...


@dataclass
class RunOptions:
    runtime: str = "auto"
    device: str = "auto"
    out_root: Path = Path("results")
    settings: dict[str, Any] = field(default_factory=dict)  # runtime settings (interpreter, env...)


@dataclass
class Outcome:
    artifact: Artifact
    summary: dict[str, Any]
    interrupted: bool

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        bad = {k: v for k, v in self.summary["counts"].items() if k != "ok" and k != "skipped"}
        return 1 if any(bad.values()) else 0


def choose_runtimes(
    engines: list[str], requested: str, settings_for: dict[str, dict[str, Any]], reporter: Reporter
) -> dict[str, tuple[Runtime, dict[str, Any]]]:
    """Pick and check the runtime of every engine; BadInput when one cannot run."""
    chosen: dict[str, tuple[Runtime, dict[str, Any]]] = {}
    for name in engines:
        engine = get_engine(name)
        settings = settings_for[name]
        if requested == "auto" and "docker" not in runtime_names():
            runtime = get_runtime("local")
            reporter.note(f"{name}: runtime auto -> local (no docker runtime installed)")
        elif requested == "auto":
            docker = get_runtime("docker")
            ok, why = docker.availability(engine, settings)
            runtime = docker if ok else get_runtime("local")
            reporter.note(f"{name}: runtime auto -> {runtime.name} ({'docker: ' if not ok else ''}{why})")
        else:
            runtime = get_runtime(requested)
        info = runtime.check(engine, settings)
        chosen[name] = (runtime, {**settings, "checked": info, "resolved_interpreter": info.get("interpreter")})
    return chosen


def merge_runtime_block(scenario: Scenario, settings: dict[str, Any]) -> dict[str, Any]:
    """Settings with the scenario's ``runtime.<name>`` blocks under them (command-line values win)."""
    merged = dict(settings)
    for name, block in (scenario.document.get("runtime") or {}).items():
        if isinstance(block, dict):
            merged[name] = {**block, **(settings.get(name) or {})}
    return merged


def check_device(device: str) -> dict[str, Any]:
    """--device cuda needs a GPU that NVML can see; returns the NVML snapshot."""
    from orchestrator.gpus import nvml_snapshot

    snapshot = nvml_snapshot()
    if device == "cuda" and not snapshot["gpus"]:
        raise BadInput(f"--device cuda: no GPU found ({snapshot.get('reason') or 'NVML reports 0 devices'})")
    return snapshot


def prepare_dataset(scenario: Scenario) -> PreparedSplit:
    workload = scenario.workload
    dataset = workload["dataset"]
    geometry = (workload["input"]["height"], workload["input"]["width"], workload["input"]["channels"])
    return prepare_split(dataset["name"], dataset["source"], dataset["split"], dataset.get("samples"),
                         geometry, workload["model"]["num_classes"], workload["seed"])


def _record(plan: RunPlan, status: str, reason: str | None, runtime_info: dict[str, Any], started: str,
            wall_s: float, exit_code: int | None = None, parity: dict[str, Any] | None = None,
            throughput: float | None = None) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "run_id": plan.run_id,
        "engine": plan.engine,
        "precision": plan.precision,
        "path": plan.path,
        "batch_per_device": plan.batch,
        "devices": plan.devices,
        "repeat": plan.repeat,
        "status": status,
        "reason": reason,
        "exit_code": exit_code,
        "runtime": runtime_info,
        "started_at": started,
        "finished_at": utc_now(),
        "wall_s": round(wall_s, 3),
        "parity": parity or {"checked": False, "ok": False, "mismatches": []},
        "throughput": throughput,
    }


def _describe_mismatches(mismatches: list[dict[str, Any]]) -> str:
    parts = [f"{m['field']} expected {m['expected']!r} got {m['actual']!r}" + (f" vs {m['against']}" if m.get("against", "spec") != "spec" else "")
             for m in mismatches[:3]]
    more = f" (+{len(mismatches) - 3} more)" if len(mismatches) > 3 else ""
    return "parity: " + "; ".join(parts) + more


def judge(spec: dict[str, Any], execution: Execution, result_path: Path) -> tuple[str, str | None, dict[str, Any] | None, dict[str, Any]]:
    """(status, reason, result or None, parity verdict) of one finished execution."""
    no_parity = {"checked": False, "ok": False, "mismatches": []}
    result = None
    if result_path.is_file():
        try:
            result = json.loads(result_path.read_text())
            validate(result, "engine-result")
        except (ValueError, SchemaError) as exc:
            # Keep the engine's output as evidence, under a name no schema applies to.
            result_path.replace(result_path.with_name(REJECTED_RESULT))
            reason = f"engine result does not match its schema: {exc}" if isinstance(exc, SchemaError) else "engine result is not JSON"
            reason += f" (kept as {REJECTED_RESULT})"
            if execution.outcome in ("timeout", "interrupted"):
                return execution.outcome, execution.detail, None, no_parity
            return "invalid", reason, None, no_parity
    if execution.outcome in ("timeout", "interrupted"):
        return execution.outcome, execution.detail, result, no_parity
    if execution.outcome == "error":
        return "failed", execution.detail, None, no_parity
    if result is None:
        return "failed", f"engine exited with code {execution.exit_code} and wrote no result file", None, no_parity
    if result["status"] == "failed":
        failure = result["failure"]
        status = "interrupted" if failure["kind"] == "interrupted" else "failed"
        return status, f"{failure['kind']}: {failure['message']}", result, no_parity
    if execution.exit_code != 0:
        return "failed", f"engine exited with code {execution.exit_code} although its result says ok", result, no_parity
    if result["engine"] != spec["engine"] or result["run_id"] != spec["run_id"]:
        return "invalid", f"result is for {result['engine']}/{result['run_id']}, not this run", result, no_parity
    mismatches = check_against_spec(spec, result, result["environment"].get("device_kind"))
    parity = {"checked": True, "ok": not mismatches, "mismatches": mismatches}
    if mismatches:
        return "invalid", _describe_mismatches(mismatches), result, parity
    if not result["measurements"]["steady"]["throughput"]:
        return "invalid", "no steady-state steps were measured", result, parity
    return "ok", None, result, parity


def _run_one(artifact: Artifact, scenario: Scenario, plan: RunPlan, split: PreparedSplit, engine: EngineInfo,
             runtime: Runtime, settings: dict[str, Any], device: str, reporter: Reporter) -> tuple[dict[str, Any], dict[str, Any] | None]:
    run_dir = artifact.run_dir(plan.run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = RunPaths(run_dir, run_dir / "spec.json", run_dir / "result.json", run_dir / "engine.log", split.path)
    started, clock = utc_now(), time.monotonic()
    runtime_info = dict(settings.get("checked") or {"name": runtime.name})
    if plan.skip_reason:
        record = _record(plan, "skipped", plan.skip_reason, runtime_info, started, 0.0)
        write_json(run_dir / "run.json", record, "run-record")
        return record, None
    spec = build_spec(scenario, plan, split, runtime.dataset_path(paths), device)
    write_json(paths.spec, spec, "run-spec")
    monitors = [factory() for factory in MONITORS]
    for monitor in monitors:
        monitor.start(run_dir, settings)
    try:
        execution = runtime.execute(engine, paths, settings, spec["measurement"]["timeout_s"], reporter.engine_line)
    finally:
        observed = {monitor.name: monitor.stop() for monitor in monitors}
    runtime_info.update(execution.info)
    status, reason, result, parity = judge(spec, execution, paths.result)
    throughput = result["measurements"]["steady"]["throughput"] if status == "ok" and result else None
    record = _record(plan, status, reason, runtime_info, started, time.monotonic() - clock,
                     execution.exit_code, parity, throughput)
    if observed:
        record["telemetry"] = observed
    write_json(run_dir / "run.json", record, "run-record")
    return record, result


def _cross_check(records: list[dict[str, Any]], results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Cross-engine parity over valid runs; flips disagreeing runs to invalid. Returns the findings."""
    candidates = [
        {"run_id": r["run_id"], "engine": r["engine"], "key": (r["precision"], r["path"], r["batch_per_device"], r["devices"]),
         "work": results[r["run_id"]]["work"]}
        for r in records if r["status"] == "ok" and r["run_id"] in results
    ]
    flagged = cross_engine(candidates)
    findings = []
    for record in records:
        mismatches = flagged.get(record["run_id"])
        if not mismatches:
            continue
        record["status"] = "invalid"
        record["throughput"] = None
        record["parity"]["ok"] = False
        record["parity"]["mismatches"].extend(mismatches)
        record["reason"] = "cross-engine " + _describe_mismatches(mismatches)
        findings.append({"run_id": record["run_id"], "engine": record["engine"], "mismatches": mismatches})
    return findings


def run_scenario(scenario: Scenario, plans: list[RunPlan], options: RunOptions, reporter: Reporter) -> Outcome:
    engines = sorted({p.engine for p in plans if not p.skip_reason})
    base = merge_runtime_block(scenario, options.settings)
    settings_for = {name: {**base, "device": options.device, **(scenario.engine_block(name) or {})} for name in engines}
    for name in engines:
        settings_for[name].pop("options", None)
    gpus = check_device(options.device)
    runtimes = choose_runtimes(engines, options.runtime, settings_for, reporter)
    split = prepare_dataset(scenario)
    reporter.note(f"dataset {split.name}/{split.split}: {split.samples} samples, sha256 {split.sha256[:12]}"
                  + (" (synthetic)" if split.synthetic else ""))
    artifact = create_artifact(options.out_root, scenario.name)
    write_text_atomic(artifact.root / SCENARIO, yaml.safe_dump(scenario.document, sort_keys=False))
    write_manifest(artifact, complete=False)
    plans = resolve_max_batch(artifact, scenario, plans, split, runtimes, options.device, reporter)
    return run_plans(artifact, scenario, plans, split, runtimes, options, reporter, gpus)


def run_plans(artifact: Artifact, scenario: Scenario, plans: list[RunPlan], split: PreparedSplit,
              runtimes: dict[str, tuple[Runtime, dict[str, Any]]], options: RunOptions, reporter: Reporter,
              gpus: dict[str, Any], previous: list[tuple[dict[str, Any], dict[str, Any] | None]] | None = None) -> Outcome:
    """Run ``plans`` into ``artifact``; ``previous`` (record, result) pairs are kept and summarised too."""
    records: list[dict[str, Any]] = [record for record, _ in previous or []]
    results: dict[str, dict[str, Any]] = {record["run_id"]: result for record, result in previous or [] if result is not None}
    interrupted = False
    for index, plan in enumerate(plans, 1):
        if interrupted:
            record = _record(plan, "skipped", "not started: the scenario was interrupted", {"name": "none"}, utc_now(), 0.0)
            artifact.run_dir(plan.run_id).mkdir(parents=True, exist_ok=True)
            write_json(artifact.run_dir(plan.run_id) / "run.json", record, "run-record")
            records.append(record)
            continue
        reporter.run_started(index, len(plans), plan)
        runtime, settings = runtimes.get(plan.engine, (get_runtime("local"), {}))
        started = utc_now()
        try:
            record, result = _run_one(artifact, scenario, plan, split, get_engine(plan.engine), runtime, settings, options.device, reporter)
        except KeyboardInterrupt:
            # Ctrl-C outside the engine's own wait (while writing the spec or reading the result).
            record, result = _record(plan, "interrupted", "interrupted by the user (Ctrl-C)", {"name": runtime.name}, started, 0.0), None
            write_json(artifact.run_dir(plan.run_id) / "run.json", record, "run-record")
        records.append(record)
        if result is not None:
            results[plan.run_id] = result
        reporter.run_finished(record)
        write_manifest(artifact, complete=False)
        interrupted = record["status"] == "interrupted"
    findings = _cross_check(records, results)
    for finding in findings:
        record = next(r for r in records if r["run_id"] == finding["run_id"])
        write_json(artifact.run_dir(record["run_id"]) / "run.json", record, "run-record")
        reporter.note(f"{record['run_id']}: {record['reason']}")
    summary = summarize(scenario.name, artifact.artifact_id, scenario.smoke,
                        [(r, results.get(r["run_id"])) for r in records], host_facts(gpus), findings,
                        scenario.measurement.get("time_to_train"))
    searches = sorted((artifact.root / MAXBATCH_DIR).glob(f"*/{SEARCH_FILE}"))
    if searches:
        summary["max_batch"] = [read_json(path, "maxbatch") for path in searches]
    write_json(artifact.root / SUMMARY, summary, "summary")
    write_manifest(artifact, complete=not interrupted)
    return Outcome(artifact, summary, interrupted)
