"""One run attempt: write the spec, execute it through the runtime (monitors around it), judge the result.

Used for every measured run (``execute``) and every maximal-batch probe (``maxbatch``); resuming an
artifact runs its missing runs through ``execute`` again, so there is one way a run is made and judged.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bench_engine.contract import EngineResult, RunSpec
from orchestrator.data import PreparedSplit
from orchestrator.engines.registry import EngineInfo
from orchestrator.host.gpus import GpuRequest
from orchestrator.jsonio import write_json
from orchestrator.judge.parity import check_against_spec
from orchestrator.judge.record import STATUSES, ParityVerdict, describe_mismatches
from orchestrator.judge.result_read import REJECTED_RESULT, read_result
from orchestrator.runtimes import Execution, RunPaths, Runtime, RuntimeSettings

__all__ = ["REJECTED_RESULT", "Attempt", "Judgement", "RunMonitor", "describe_mismatches", "execute_spec", "judge", "run_attempt",
           "write_spec"]


class MonitorReport(Protocol):
    """What a monitor observed, written into the run record as its ``to_json()``."""

    def to_json(self) -> dict[str, Any]: ...


class RunMonitor(Protocol):
    """Observes one run (e.g. GPU telemetry): started before the engine, stopped after it."""

    name: str

    def start(self, run_dir: Path, request: GpuRequest) -> None: ...
    def stop(self) -> MonitorReport: ...


@runtime_checkable
class LineListener(Protocol):
    """A monitor that also hears every line of the engine's output as it arrives (GPU telemetry: the phase lines)."""

    def line(self, text: str) -> None: ...


def _tapped(on_line: Callable[[str], None], monitors: Sequence[RunMonitor]) -> Callable[[str], None]:
    """``on_line``, and after it every listening monitor's ``line``."""
    listeners = [monitor for monitor in monitors if isinstance(monitor, LineListener)]
    if not listeners:
        return on_line

    def both(text: str) -> None:
        on_line(text)
        for listener in listeners:
            listener.line(text)

    return both


@dataclass(frozen=True)
class Judgement:
    """The verdict on one finished execution: status, why, the engine's result (when it is kept) and parity."""

    status: str
    reason: str | None = None
    result: EngineResult | None = None
    parity: ParityVerdict = field(default_factory=ParityVerdict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES or self.status == "skipped":
            raise ValueError(f"an attempt cannot end {self.status!r}")
        if self.status == "ok" and (self.result is None or not self.parity.ok or self.reason is not None):
            raise ValueError("an ok attempt has a result that passed parity, and no reason")

    @property
    def throughput(self) -> float | None:
        """The steady-state throughput the engine counted (None without measurements)."""
        measurements = self.result.measurements if self.result is not None else None
        value = measurements.steady.get("throughput") if measurements is not None else None
        return float(value) if value else None


@dataclass(frozen=True)
class Attempt:
    """What one execution of a spec gave: the spec, how the process ended, the verdict, what the monitors saw."""

    spec: RunSpec
    execution: Execution
    judgement: Judgement
    observed: Mapping[str, Any]  # monitor name -> what it observed (the record's telemetry block)


def run_paths(run_dir: Path, dataset: Path) -> RunPaths:
    """The files of one run folder."""
    return RunPaths(run_dir, run_dir / "spec.json", run_dir / "result.json", run_dir / "engine.log", dataset)


def write_spec(run_dir: Path, split: PreparedSplit, runtime: Runtime, make_spec: Callable[[str], RunSpec]) -> tuple[RunPaths, RunSpec]:
    """Write ``make_spec(dataset path as the runtime mounts it)`` into ``run_dir``: the run's files and its spec."""
    paths = run_paths(run_dir, split.path)
    spec = make_spec(runtime.dataset_path(paths))
    write_json(paths.spec, spec.to_json(), "run-spec")
    return paths, spec


def execute_spec(paths: RunPaths, spec: RunSpec, runtime: Runtime, engine: EngineInfo, settings: RuntimeSettings,
                 on_line: Callable[[str], None], monitors: Sequence[RunMonitor] = ()) -> Attempt:
    """Execute the spec written in ``paths`` (monitors around it) and judge it."""
    for monitor in monitors:
        monitor.start(paths.run_dir, settings.gpu_request())
    try:
        execution = runtime.execute(engine, paths, settings, spec.measurement.timeout_s, _tapped(on_line, monitors))
    finally:
        observed = {monitor.name: monitor.stop().to_json() for monitor in monitors}
    return Attempt(spec, execution, judge(spec, execution, paths.result), observed)


def run_attempt(run_dir: Path, split: PreparedSplit, runtime: Runtime, engine: EngineInfo, settings: RuntimeSettings,
                make_spec: Callable[[str], RunSpec], on_line: Callable[[str], None],
                monitors: Sequence[RunMonitor] = ()) -> Attempt:
    """Write ``make_spec(dataset path as the runtime mounts it)`` into ``run_dir``, execute it, judge it."""
    paths, spec = write_spec(run_dir, split, runtime, make_spec)
    return execute_spec(paths, spec, runtime, engine, settings, on_line, monitors)


def _ended(code: int | None) -> str:
    """How the engine process ended, in words (a signal for a negative code, as subprocess reports it)."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        oom = " (the kernel's OOM killer sends it when memory runs out)" if -code == signal.SIGKILL else ""
        return f"engine was killed by {name}{oom}"
    return f"engine exited with code {code}"


def judge(spec: RunSpec, execution: Execution, result_path: Path) -> Judgement:
    """The verdict on one finished execution. Whatever the engine wrote, judging never raises: a failure
    while judging makes this run ``invalid`` with the reason."""
    try:
        return _judge(spec, execution, result_path)
    except Exception as exc:  # one hostile result must not end the scenario
        return Judgement("invalid", f"engine result could not be judged: {exc.__class__.__name__}: {str(exc)[:200]}")


def _judge(spec: RunSpec, execution: Execution, result_path: Path) -> Judgement:
    result, reason = read_result(result_path)
    if reason is not None:
        if execution.outcome in ("timeout", "interrupted"):
            return Judgement(execution.outcome, execution.detail)
        return Judgement("invalid", reason)
    if execution.outcome in ("timeout", "interrupted"):
        return Judgement(execution.outcome, execution.detail, result)
    if execution.outcome == "error":
        return Judgement("failed", execution.detail)
    if result is None:
        return Judgement("failed", f"{_ended(execution.exit_code)} and wrote no result file")
    if result.status == "failed":
        failure = result.failure or {}
        status = "interrupted" if failure.get("kind") == "interrupted" else "failed"
        return Judgement(status, f"{failure.get('kind')}: {failure.get('message')}", result)
    if execution.exit_code != 0:
        return Judgement("failed", f"engine exited with code {execution.exit_code} although its result says ok", result)
    if result.engine != spec.engine or result.run_id != spec.run_id:
        return Judgement("invalid", f"result is for {result.engine}/{result.run_id}, not this run", result)
    parity = ParityVerdict.of(check_against_spec(spec, result))
    if parity.mismatches:
        return Judgement("invalid", describe_mismatches(parity.mismatches), result, parity)
    judged = Judgement("ok", None, result, parity)
    if not judged.throughput:
        return Judgement("invalid", "no steady-state steps were measured", result, parity)
    return judged
