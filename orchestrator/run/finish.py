"""The records of a scenario's runs, and what follows the last run: seals, cross-engine parity, summary, manifest."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bench_engine.contract import EngineResult
from orchestrator import signals
from orchestrator.artifacts import Artifact, write_manifest
from orchestrator.artifacts.layout import SUMMARY
from orchestrator.artifacts.seal import tampered_run
from orchestrator.clock import utc_now
from orchestrator.host.gpus import NvmlSnapshot
from orchestrator.host.hostinfo import host_facts
from orchestrator.host.provenance import HostState, finish_host
from orchestrator.jsonio import read_json, write_json
from orchestrator.judge.maxbatch_limits import SearchLimit, limit_warnings
from orchestrator.judge.parity import CrossRun, cross_engine
from orchestrator.judge.record import RunRecord, describe_mismatches
from orchestrator.judge.summary import summarize
from orchestrator.judge.summary_model import CrossFinding, Summary
from orchestrator.run.attempt import Attempt
from orchestrator.run.maxbatch import MAXBATCH_DIR, SEARCH_FILE
from orchestrator.runtimes import RuntimeFacts
from orchestrator.scenario import RunPlan, Scenario
from orchestrator.scenario.matrix import reference_engine


class Reporter(Protocol):
    """What the executor tells the user interface."""

    def note(self, message: str) -> None: ...
    def warn(self, message: str) -> None: ...
    def run_started(self, index: int, total: int, plan: RunPlan) -> None: ...
    def engine_line(self, line: str) -> None: ...
    def run_finished(self, record: RunRecord) -> None: ...


@dataclass(frozen=True)
class Outcome:
    artifact: Artifact
    summary: Summary
    interrupted: bool

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return signals.exit_status()  # 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP
        return 1 if self.summary.bad_runs else 0


def new_record(plan: RunPlan, status: str, reason: str | None, runtime: Mapping[str, Any], started: str, wall_s: float,
               **outcome: Any) -> RunRecord:
    """The record of ``plan``'s run, finished now; ``outcome``: exit_code, parity, throughput, apparent_throughput, telemetry, host."""
    return RunRecord(run_id=plan.run_id, engine=plan.engine, precision=plan.precision, path=plan.path,
                     batch_per_device=plan.batch, devices=plan.devices, repeat=plan.repeat, status=status, reason=reason,
                     runtime=dict(runtime), started_at=started, finished_at=utc_now(), wall_s=round(wall_s, 3), **outcome)


def attempt_record(plan: RunPlan, attempt: Attempt, runtime: RuntimeFacts, started: str, wall_s: float,
                   host: HostState) -> RunRecord:
    """The record of ``plan``'s finished attempt: its verdict, the runtime's facts of it, what the monitors saw,
    the host before it (``host``) and as it ended."""
    if attempt.execution.info is not None:
        runtime = runtime.merged(attempt.execution.info)
    verdict = attempt.judgement
    return new_record(plan, verdict.status, verdict.reason, runtime.to_json(), started, wall_s,
                      exit_code=attempt.execution.exit_code, parity=verdict.parity,
                      throughput=verdict.throughput if verdict.status == "ok" else None,
                      apparent_throughput=verdict.throughput if verdict.status == "invalid" else None,
                      telemetry=dict(attempt.observed) if attempt.observed else None, host=finish_host(host).to_json())


def write_record(artifact: Artifact, record: RunRecord) -> None:
    write_json(artifact.run_dir(record.run_id) / "run.json", record.to_json(), "run-record")


def flag_tampered(artifact: Artifact, records: list[RunRecord]) -> list[RunRecord]:
    """Make ``invalid`` (in place) every record whose run folder was tampered with; returns the records changed."""
    changed = []
    for index, record in enumerate(records):
        why = tampered_run(artifact.root, record.run_id)
        if why is None or (record.status == "invalid" and str(record.reason or "").startswith("tampered")):
            continue
        records[index] = record.invalidated(f"tampered: {why}")
        changed.append(records[index])
    return changed


def cross_check(records: list[RunRecord], results: Mapping[str, EngineResult]) -> list[CrossFinding]:
    """Cross-engine parity over valid runs; makes disagreeing runs invalid (in place). Returns the findings."""
    candidates = [CrossRun(r.run_id, r.engine, r.cell, results[r.run_id].work or {})
                  for r in records if r.status == "ok" and r.run_id in results]
    flagged = cross_engine(candidates)
    findings = []
    for index, record in enumerate(records):
        mismatches = flagged.get(record.run_id)
        if not mismatches:
            continue
        records[index] = record.invalidated("cross-engine " + describe_mismatches(mismatches), mismatches)
        findings.append(CrossFinding(record.run_id, record.engine, tuple(mismatches)))
    return findings


def finish(artifact: Artifact, scenario: Scenario, records: list[RunRecord], results: Mapping[str, EngineResult],
           reporter: Reporter, gpus: NvmlSnapshot, interrupted: bool) -> Outcome:
    """Seals, cross-engine parity, summary and the final manifest."""
    changed = flag_tampered(artifact, records)  # a run whose files changed after it was sealed
    findings = cross_check(records, results)
    by_id = {r.run_id: r for r in records}
    for run_id in dict.fromkeys([r.run_id for r in changed] + [f.run_id for f in findings]):
        write_record(artifact, by_id[run_id])
        reporter.note(f"{run_id}: {by_id[run_id].reason}")
    summary = summarize(scenario.name, artifact.artifact_id, scenario.smoke, [(r, results.get(r.run_id)) for r in records],
                        host_facts(gpus), findings, scenario.measurement.time_to_train, reference_engine(scenario))
    searches = sorted((artifact.root / MAXBATCH_DIR).glob(f"*/{SEARCH_FILE}"))
    if searches:
        documents = tuple(read_json(path, "maxbatch") for path in searches)
        warnings = limit_warnings([SearchLimit.of(doc) for doc in documents])
        for warning in warnings:
            reporter.note(warning)
        summary = dataclasses.replace(summary, max_batch=documents, max_batch_warnings=tuple(warnings))
    write_json(artifact.root / SUMMARY, summary.to_json(), "summary")
    write_manifest(artifact, complete=not interrupted)
    return Outcome(artifact, summary, interrupted)

