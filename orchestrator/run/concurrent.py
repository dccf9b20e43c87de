"""Runs in flight at once, for runtimes that can have several (``Runtime.max_in_flight`` is not 1: the
slurm runtime's jobs).

In order: every run's folder is declared in flight and its spec written (the shared initial weights with
the first, before anything is submitted); every run is handed to its runtime up front
(``Runtime.submit``: the slurm runtime submits every job, in the matrix's order: repeats outermost,
engines alternating within each, ``scenario.matrix.expand``); then one thread per run follows it
(``Runtime.execute``), judges it and writes its record as it ends, and the manifest then declares in
flight exactly the runs still running. Records, manifests and the reporter are used under one lock.

Ctrl-C, SIGTERM or SIGHUP reaches the main thread while it waits (a KeyboardInterrupt,
``orchestrator.signals``): it asks every thread to stop (``signals.request_stop``); each runtime cancels
its run (``scancel``) and waits for it to end, and the run is recorded interrupted. Runs never handed
over are recorded skipped. Host monitors (GPU telemetry) watch this host only and runs in flight at once
run elsewhere (on the cluster's nodes), so these runs get none.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bench_engine.contract import EngineResult, RunSpec
from orchestrator import signals
from orchestrator.artifacts import Artifact, write_manifest
from orchestrator.clock import utc_now
from orchestrator.data import PreparedSplit
from orchestrator.engines.registry import EngineInfo, get_engine
from orchestrator.host.provenance import HostState, run_host
from orchestrator.jsonio import read_json
from orchestrator.judge.record import RunRecord
from orchestrator.model.initweights import INIT_DIR, shared_init
from orchestrator.run.attempt import Attempt, Judgement, execute_spec, run_paths, write_spec
from orchestrator.run.finish import Reporter, attempt_record, new_record, write_record
from orchestrator.run.runtime_choice import ChosenRuntime
from orchestrator.runtimes import Execution, LineSink, PlannedRun, RunPaths, RuntimeFacts, RuntimeSettings, get_runtime
from orchestrator.scenario import RunPlan, Scenario
from orchestrator.scenario.matrix import build_spec

NOT_STARTED = "not started: the scenario was interrupted"
JOIN_S = 0.5  # the main thread wakes this often while it waits (a signal interrupts the wait at once anyway)


def in_flight_limit(plans: Sequence[RunPlan], runtimes: Mapping[str, ChosenRuntime]) -> int | None:
    """How many of ``plans`` may be in flight at once: the smallest limit of their runtimes (1: one after another;
    None: no limit)."""
    limits = {chosen.runtime.max_in_flight(chosen.settings)
              for plan in plans if not plan.skip_reason and (chosen := runtimes.get(plan.engine)) is not None}
    if not limits:
        return 1
    bounded = [limit for limit in limits if limit is not None]
    return min(bounded) if bounded else None


@dataclass
class Staged:
    """One run with its spec written, ready to hand over."""

    plan: RunPlan
    chosen: ChosenRuntime
    engine: EngineInfo
    paths: RunPaths
    spec: RunSpec
    resumed: bool  # an earlier bench's run still in flight, reattached (its spec kept as it is)
    started: str
    clock: float
    host: HostState

    def planned(self) -> PlannedRun:
        return PlannedRun(self.engine, self.paths, self.chosen.settings, self.spec.measurement.timeout_s, self.resumed)


@dataclass
class Board:
    """What the run threads share: the runs in flight, the records so far, the reporter; one lock for all."""

    artifact: Artifact
    reporter: Reporter
    total: int
    flying: set[str] = field(default_factory=set)  # folders (relative) the manifest declares in flight
    records: dict[str, RunRecord] = field(default_factory=dict)
    results: dict[str, EngineResult] = field(default_factory=dict)
    done: int = 0
    claimed: set[str] = field(default_factory=set)  # runs whose thread has begun
    lock: threading.RLock = field(default_factory=threading.RLock)

    def manifest(self) -> None:
        with self.lock:
            write_manifest(self.artifact, complete=False, in_flight_folders=sorted(self.flying))

    def landed(self, plan: RunPlan, record: RunRecord, result: EngineResult | None) -> None:
        """Record the run that ended, seal it (the manifest no longer declares it in flight), tell the reporter."""
        with self.lock:
            write_record(self.artifact, record)
            self.records[plan.run_id] = record
            if result is not None:
                self.results[plan.run_id] = result
            self.flying.discard(self.rel(plan))
            self.manifest()
            self.done += 1
            self.reporter.run_started(self.done, self.total, plan)
            self.reporter.run_finished(record)

    def skipped(self, plan: RunPlan, reason: str, runtime: RuntimeFacts | None = None) -> None:
        """Record a run that will not run (skipped by plan, or never handed over)."""
        self.artifact.run_dir(plan.run_id).mkdir(parents=True, exist_ok=True)
        record = new_record(plan, "skipped", reason, (runtime or RuntimeFacts("none")).to_json(), utc_now(), 0.0)
        with self.lock:
            write_record(self.artifact, record)
            self.records[plan.run_id] = record
            self.flying.discard(self.rel(plan))

    def rel(self, plan: RunPlan) -> str:
        return self.artifact.run_dir(plan.run_id).relative_to(self.artifact.root).as_posix()

    def sink(self, plan: RunPlan, runtime: str) -> LineSink:
        """A run's line sink: the runtime's own lines ('slurm: job 12 running on n3') as notes, each state once (not the
        repeated 'still pending' of a long queue: dozens of runs wait at once); engine lines stay in engine.log."""
        prefix = f"{runtime}: "
        last = [""]

        def sink(line: str) -> None:
            state = " ".join(line.split()[:4])  # 'slurm: job 12 pending'
            if line.startswith(prefix) and state != last[0]:
                last[0] = state
                with self.lock:
                    self.reporter.note(f"{plan.run_id}: {line}")

        return sink


def _stage(board: Board, scenario: Scenario, plan: RunPlan, split: PreparedSplit, chosen: ChosenRuntime, device: str,
           resumed: bool) -> Staged:
    """The run's folder and spec (a reattached run keeps the spec its job was submitted with)."""
    run_dir = board.artifact.run_dir(plan.run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    started, clock, host = utc_now(), time.monotonic(), run_host()
    if resumed:
        paths = run_paths(run_dir, split.path)
        spec = RunSpec.from_json(read_json(paths.spec, "run-spec"))
    else:
        init = shared_init(board.artifact.root, scenario.workload.to_json(), run_dir)
        paths, spec = write_spec(run_dir, split, chosen.runtime,
                                 lambda dataset_path: build_spec(scenario, plan, split, dataset_path, device, init))
    return Staged(plan, chosen, get_engine(plan.engine), paths, spec, resumed, started, clock, host)


def _hand_over(staged: Sequence[Staged], reporter: Reporter) -> list[Staged]:
    """Every staged run handed to its runtime (one ``submit`` per runtime, in order); the ones handed over."""
    by_runtime: dict[str, list[Staged]] = {}
    for item in staged:
        by_runtime.setdefault(item.chosen.runtime.name, []).append(item)
    handed: list[Staged] = []
    for items in by_runtime.values():
        count = items[0].chosen.runtime.submit([item.planned() for item in items], reporter.note)
        handed += items[:count]
        if signals.stopping():
            break
    return handed


def _fly(item: Staged, board: Board) -> None:
    """One run's thread: follow it to its end through its runtime, judge it, record it (once, whatever started it)."""
    with board.lock:
        if item.plan.run_id in board.claimed:
            return
        board.claimed.add(item.plan.run_id)
    runtime = item.chosen.runtime
    try:
        done = execute_spec(item.paths, item.spec, runtime, item.engine, item.chosen.settings, board.sink(item.plan, runtime.name))
    except Exception as exc:  # a runtime's bug must lose neither the run nor the artifact
        why = f"{runtime.name} runtime error: {exc.__class__.__name__}: {str(exc)[:200]}"
        done = Attempt(item.spec, Execution("error", None, why), Judgement("failed", why), {})
    checked = item.chosen.settings.checked or RuntimeFacts(runtime.name)
    record = attempt_record(item.plan, done, checked, item.started, time.monotonic() - item.clock, item.host)
    board.landed(item.plan, record, done.judgement.result)


def _wait(threads: Sequence[threading.Thread]) -> bool:
    """Wait for every thread; a KeyboardInterrupt meanwhile asks them all to stop. Whether one came."""
    interrupted = False
    while True:
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(JOIN_S)
            return interrupted
        except KeyboardInterrupt:
            interrupted = True
            signals.request_stop()


def _start_all(threads: Sequence[threading.Thread]) -> None:
    """Start every thread not started yet (again after a KeyboardInterrupt cut the first pass short)."""
    for thread in threads:
        if thread.ident is None:
            try:
                thread.start()
            except RuntimeError:  # started after all, just as the interrupt came
                pass


def run_concurrently(artifact: Artifact, scenario: Scenario, plans: Sequence[RunPlan], split: PreparedSplit,
                     runtimes: Mapping[str, ChosenRuntime], device: str, reporter: Reporter,
                     resumed: frozenset[str] = frozenset()) -> tuple[list[RunRecord], dict[str, EngineResult], bool]:
    """Run ``plans`` all in flight at once (see the module's docstring): (their records in plan order, their results,
    whether the scenario was interrupted). ``resumed``: run ids whose earlier job is reattached, not started again."""
    signals.clear_stop()
    board = Board(artifact, reporter, len(plans))
    fallback = ChosenRuntime(get_runtime("local"), RuntimeSettings())
    runnable = []
    for plan in plans:
        chosen = runtimes.get(plan.engine) or fallback
        if plan.skip_reason:
            board.skipped(plan, plan.skip_reason, chosen.settings.checked or RuntimeFacts(chosen.runtime.name))
        else:
            runnable.append((plan, chosen))
    board.flying = {board.rel(plan) for plan, _ in runnable} | ({INIT_DIR} if not (artifact.root / INIT_DIR).exists() else set())
    board.manifest()  # killed from here on, the artifact still validates: every run is in flight
    staged: list[Staged] = []
    handed: list[Staged] = []
    threads: list[threading.Thread] = []
    interrupted = False
    try:
        for plan, chosen in runnable:
            staged.append(_stage(board, scenario, plan, split, chosen, device, plan.run_id in resumed))
        board.flying.discard(INIT_DIR)
        board.manifest()  # the shared initial weights sealed before any job can read them
        handed = _hand_over(staged, reporter)
        threads = [threading.Thread(target=_fly, args=(item, board), name=f"bench run {item.plan.run_id}", daemon=True)
                   for item in handed]
        _start_all(threads)
    except KeyboardInterrupt:
        interrupted = True
        signals.request_stop()
    if len(threads) < len(handed):  # interrupted between the hand-over and the threads
        threads = [threading.Thread(target=_fly, args=(item, board), daemon=True) for item in handed]
    _start_all(threads)  # every run handed over gets its thread: it cancels its job when stopping
    interrupted = _wait(threads) or interrupted or signals.stopping() or signals.received() is not None
    signals.clear_stop()  # every thread has ended: the request is answered
    flown = {item.plan.run_id for item in handed}
    for plan, _ in runnable:
        if plan.run_id not in flown and plan.run_id not in board.records:
            board.skipped(plan, NOT_STARTED)
    board.manifest()
    return [board.records[p.run_id] for p in plans if p.run_id in board.records], board.results, interrupted
