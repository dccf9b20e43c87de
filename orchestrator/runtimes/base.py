"""The runtime interface: how one run spec is executed (a subprocess, a container, a job...).

A runtime is one module of this package (see ``orchestrator.runtimes``) with a :class:`Runtime` subclass.
It must ``check`` an engine and ``execute`` one run. A runtime that can have several runs in flight at once
(a scheduler's jobs) also says how many (:meth:`Runtime.max_in_flight`; 1, the default, runs them one
after another), is handed every run up front (:meth:`Runtime.submit`) and can pick up a run an earlier,
killed bench left in flight (:meth:`Runtime.reattach`); the executor then calls ``execute`` for each run
in its own thread (``orchestrator.run.concurrent``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.engines.registry import EngineInfo
from orchestrator.runtimes.engine_settings import RuntimeSettings
from orchestrator.runtimes.runtime_facts import RuntimeFacts

LineSink = Callable[[str], None]


@dataclass
class RunPaths:
    """Host paths of one run: its folder, spec, result and log, and the dataset split."""

    run_dir: Path
    spec: Path
    result: Path
    log: Path
    dataset: Path


@dataclass
class Execution:
    """How the execution ended, as seen by the runtime."""

    outcome: str  # exited | timeout | interrupted | error
    exit_code: int | None = None
    detail: str | None = None
    info: RuntimeFacts | None = None  # what the runtime knows of the run (None: nothing yet)


@dataclass(frozen=True)
class PlannedRun:
    """One run handed to a runtime up front (:meth:`Runtime.submit`), its spec already written."""

    engine: EngineInfo
    paths: RunPaths
    settings: RuntimeSettings
    timeout_s: float
    resumed: bool = False  # an earlier bench's run that ``reattach`` picked up: not to be started again


class Runtime(ABC):
    """A place engines run. Implementations live one per module in this package."""

    name: str = ""
    # a file this runtime writes into a run's folder as soon as the run is handed over (slurm: its job), so that
    # resume knows the runtime of an artifact whose bench was killed before any run had a record
    in_flight_file: str | None = None

    @abstractmethod
    def check(self, engine: EngineInfo, settings: RuntimeSettings) -> RuntimeFacts:
        """Raise BadInput if ``engine`` cannot run here; return what the record should name."""

    def dataset_path(self, paths: RunPaths) -> str:
        """The dataset folder as the engine will see it."""
        return str(paths.dataset)

    def spec_paths(self, paths: RunPaths) -> tuple[str, str]:
        """The spec and result paths as the engine will see them."""
        return str(paths.spec), str(paths.result)

    @abstractmethod
    def execute(self, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings, timeout_s: float, sink: LineSink) -> Execution:
        """Run the engine entrypoint; stream its output to ``paths.log`` and ``sink``.

        Must stop the engine on timeout and on KeyboardInterrupt (returning outcome
        'interrupted' after cleaning up), and never leave anything running.
        """

    def max_in_flight(self, settings: RuntimeSettings) -> int | None:
        """How many runs the executor may have in flight here at once: 1 (the default) runs them one after
        another in the main thread; more, or None (no limit), runs each ``execute`` in its own thread after
        :meth:`submit`. ``execute`` must then end early, as on KeyboardInterrupt, once
        ``orchestrator.signals.stopping()`` is true."""
        return 1

    def submit(self, runs: Sequence[PlannedRun], sink: LineSink) -> int:
        """Hand over every run, in the executor's order, before the first ``execute`` (only called when
        :meth:`max_in_flight` is not 1); runs marked ``resumed`` are in flight already. Returns how many
        of ``runs`` (the first ones) were handed over: on KeyboardInterrupt, stop, call
        ``signals.request_stop()`` and return the count; the rest are recorded skipped. Default: nothing to do."""
        return len(runs)

    def reattach(self, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings) -> str | None:
        """For ``bench scenario resume``: can ``execute`` still follow the run an earlier bench left in
        ``paths`` (e.g. its job still queued or running, or ended with its result)? A note saying what it
        found, or None (the default): the run's folder is moved aside and the run starts again."""
        return None

    def availability(self, engine: EngineInfo, settings: RuntimeSettings) -> tuple[bool, str]:
        """For --runtime auto: can this runtime run ``engine`` now, and why (not)."""
        from orchestrator.errors import BadInput

        try:
            self.check(engine, settings)
        except BadInput as exc:
            return False, str(exc)
        return True, "available"
