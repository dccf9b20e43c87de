"""What a framework engine implements: an :class:`Engine` that prepares a :class:`Workload`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from bench_engine.contract import RunSpec
from bench_engine.data import Dataset
from bench_engine.report import EnvironmentFacts, PrecisionReport, Readback, Switches
from bench_engine.schedule import StepBatch
from bench_engine.weights import WeightChange

LOSS_STEPS = 20  # K: the first K training losses go into every result (measurements.losses)


class UnsupportedError(RuntimeError):
    """The engine cannot do what the spec asks (unknown arch, precision on this device...)."""


@dataclass
class Workload(ABC):
    """A model, its optimizer and its data, ready to run steps.

    The harness calls :meth:`step` for every step in order, :meth:`sync` whenever it reads the
    clock and :meth:`block_done` after each block's clock read; steps may be asynchronous in between.
    """

    trainable_parameters: int
    precision: PrecisionReport
    data_placement: str
    optimizations: Switches = field(default_factory=dict)
    # Devices the run trains on. Every StepBatch is then a global batch of per_device x world_size
    # samples; each device takes its share (bench_engine.shards).
    world_size: int = 1
    # What the engine read back from its live objects (docs/engine-contract.md, section 2)
    readback: Readback = field(default_factory=Readback)

    @abstractmethod
    def step(self, batch: StepBatch) -> None:
        """Run one training (or inference) step on ``batch``; may return before the device is done."""

    @abstractmethod
    def sync(self) -> None:
        """Block until every step issued so far has finished on the device."""

    def loss(self) -> float | None:
        """The loss of the last finished training step (called after :meth:`sync`)."""
        return None

    def losses(self) -> list[float]:
        """The training loss of each of the first LOSS_STEPS steps, in order (read after the last step)."""
        return []

    def block_done(self) -> None:
        """The harness read the clock after a block (bench_engine.harness.timing_blocks): the steps since the
        previous call form one block. Outside the timed window; must not synchronise or read the device."""
        return None

    def block_losses(self) -> list[float]:
        """The mean training loss over the steps of each block, in block order (read after the last step;
        ``[]`` for inference). Kept on the device during the run (docs/engine-contract.md, section 4)."""
        return []

    def weight_change(self) -> WeightChange | None:
        """How far training moved the trainable parameters from those read back after loading (read after the
        last step, before :meth:`close`; None where the engine does not keep the initial values)."""
        return None

    def peak_memory_bytes(self) -> int | None:
        """Peak device memory used, where the framework reports it."""
        return None

    def memory_limit_bytes(self) -> int | None:
        """The most device memory the framework's allocator may hold, as the framework reports it (None where it
        reports none): what a maximal-batch search's outcome is relative to."""
        return None

    def close(self) -> None:
        """Release what the run holds (a process group...) after its last step; not timed."""
        return None


class Engine(ABC):
    """A framework adapter. ``prepare`` imports the framework, so setup time covers the import."""

    name: str = ""
    framework: str = ""

    def processes(self, spec: RunSpec) -> int:
        """Worker processes a run of ``spec`` needs: 1, or one per device for engines that run
        data parallelism as one process per device (bench_engine.launch starts them)."""
        return 1

    @abstractmethod
    def environment(self, spec: RunSpec) -> EnvironmentFacts:
        """framework_version, cuda, cudnn, driver, device_kind, devices, extra (as seen inside)."""

    @abstractmethod
    def prepare(self, spec: RunSpec, data: Dataset) -> Workload:
        """Build the model and optimizer, place the data, return the workload."""

    def is_out_of_memory(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the framework's device out-of-memory error."""
        text = f"{type(exc).__name__}: {exc}".lower()
        return "out of memory" in text or "resource_exhausted" in text or "resourceexhausted" in text
