"""One run attempt: write the spec, execute it through the runtime (monitors around it), judge the result.

Used for every measured run (``execute``) and every maximal-batch probe (``maxbatch``); resuming an
artifact runs its missing runs through ``execute`` again, so there is one way a run is made and judged.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.data import PreparedSplit
from orchestrator.engines.registry import EngineInfo
from orchestrator.jsonio import write_json
from orchestrator.judge.parity import check_against_spec
from orchestrator.judge.result_read import REJECTED_RESULT, read_result
from orchestrator.runtimes import Execution, RunPaths, Runtime

__all__ = ["REJECTED_RESULT", "Attempt", "RunMonitor", "judge", "run_attempt"]


class RunMonitor(Protocol):
    """Observes one run (e.g. GPU telemetry): started before the engine, stopped after it."""

    name: str

    def start(self, run_dir: Path, settings: dict[str, Any]) -> None: ...
    def stop(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Attempt:
    """What one execution of a spec gave: the spec, how the process ended, and the verdict on its result."""

    spec: dict[str, Any]
    execution: Execution
    status: str
    reason: str | None
    result: dict[str, Any] | None
    parity: dict[str, Any]
    observed: dict[str, Any]


def run_paths(run_dir: Path, dataset: Path) -> RunPaths:
    """The files of one run folder."""
    return RunPaths(run_dir, run_dir / "spec.json", run_dir / "result.json", run_dir / "engine.log", dataset)


def run_attempt(run_dir: Path, split: PreparedSplit, runtime: Runtime, engine: EngineInfo, settings: dict[str, Any],
                make_spec: Callable[[str], dict[str, Any]], on_line: Callable[[str], None],
                monitors: Sequence[RunMonitor] = ()) -> Attempt:
    """Write ``make_spec(dataset path as the runtime mounts it)`` into ``run_dir``, execute it, judge it."""
    paths = run_paths(run_dir, split.path)
    spec = make_spec(runtime.dataset_path(paths))
    write_json(paths.spec, spec, "run-spec")
    for monitor in monitors:
        monitor.start(run_dir, settings)
    try:
        execution = runtime.execute(engine, paths, settings, spec["measurement"]["timeout_s"], on_line)
    finally:
        observed = {monitor.name: monitor.stop() for monitor in monitors}
    status, reason, result, parity = judge(spec, execution, paths.result)
    return Attempt(spec, execution, status, reason, result, parity, observed)


def describe_mismatches(mismatches: list[dict[str, Any]]) -> str:
    """The first three parity mismatches in words, and how many more."""
    parts = [f"{m['field']} expected {m['expected']!r} got {m['actual']!r}" + (f" vs {m['against']}" if m.get("against", "spec") != "spec" else "")
             for m in mismatches[:3]]
    more = f" (+{len(mismatches) - 3} more)" if len(mismatches) > 3 else ""
    return "parity: " + "; ".join(parts) + more


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


NO_PARITY: dict[str, Any] = {"checked": False, "ok": False, "mismatches": []}


def judge(spec: dict[str, Any], execution: Execution, result_path: Path) -> tuple[str, str | None, dict[str, Any] | None, dict[str, Any]]:
    """(status, reason, result or None, parity verdict) of one finished execution. Whatever the engine
    wrote, judging never raises: a failure while judging makes this run ``invalid`` with the reason."""
    try:
        return _judge(spec, execution, result_path)
    except Exception as exc:  # one hostile result must not end the scenario
        return "invalid", f"engine result could not be judged: {exc.__class__.__name__}: {str(exc)[:200]}", None, dict(NO_PARITY)


def _judge(spec: dict[str, Any], execution: Execution, result_path: Path) -> tuple[str, str | None, dict[str, Any] | None, dict[str, Any]]:
    no_parity = dict(NO_PARITY, mismatches=[])
    result, reason = read_result(result_path)
    if reason is not None:
        if execution.outcome in ("timeout", "interrupted"):
            return execution.outcome, execution.detail, None, no_parity
        return "invalid", reason, None, no_parity
    if execution.outcome in ("timeout", "interrupted"):
        return execution.outcome, execution.detail, result, no_parity
    if execution.outcome == "error":
        return "failed", execution.detail, None, no_parity
    if result is None:
        return "failed", f"{_ended(execution.exit_code)} and wrote no result file", None, no_parity
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
        return "invalid", describe_mismatches(mismatches), result, parity
    if not result["measurements"]["steady"]["throughput"]:
        return "invalid", "no steady-state steps were measured", result, parity
    return "ok", None, result, parity
