"""The runtime interface: how one run spec is executed (a subprocess, a container, a job...)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
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


class Runtime(ABC):
    """A place engines run. Implementations live one per module in this package."""

    name: str = ""

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

    def availability(self, engine: EngineInfo, settings: RuntimeSettings) -> tuple[bool, str]:
        """For --runtime auto: can this runtime run ``engine`` now, and why (not)."""
        from orchestrator.errors import BadInput

        try:
            self.check(engine, settings)
        except BadInput as exc:
            return False, str(exc)
        return True, "available"
