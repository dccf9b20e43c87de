"""What a runtime is given for one engine: :class:`RuntimeSettings`.

One typed object per engine, made once before any run from the blocks the command line and the scenario
give (``--python``, ``--visible-devices``, ``--slurm-*``, ``runtime.<name>``, ``engines.<name>``) over the
environment (``BENCH_SLURM_*``, ``BENCH_DOCKER_SHM_SIZE``): the device asked for, the engine's own image,
the settings of each runtime (each checked when made: :mod:`local_settings`, :mod:`docker_settings`,
:mod:`slurm_settings`) and, once its runtime has checked it, what the check found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.host.gpus import GpuRequest
from orchestrator.runtimes.docker_settings import DockerSettings, docker_settings
from orchestrator.runtimes.local_settings import LocalSettings, local_settings
from orchestrator.runtimes.runtime_facts import RuntimeFacts
from orchestrator.runtimes.slurm_settings import SlurmSettings, slurm_settings

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class RuntimeSettings:
    """The settings a runtime runs one engine with (BadInput when made with a bad one)."""

    device: str = "auto"  # --device: auto | cpu | cuda
    image: str | None = None  # engines.<name>.image (docker, slurm's container mode)
    local: LocalSettings = field(default_factory=LocalSettings)  # interpreter, env, visible_devices
    docker: DockerSettings = field(default_factory=DockerSettings)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    checked: RuntimeFacts | None = None  # what the runtime's check found (None: not checked yet)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise BadInput(f"--device: '{self.device}' is not one of {', '.join(DEVICES)}")
        if self.image is not None and (not self.image.strip() or any(ord(c) < 32 or ord(c) == 127 for c in self.image)):
            raise BadInput(f"image: {self.image[:80]!r} is empty or holds a control character")

    @classmethod
    def from_blocks(cls, given: dict[str, Any], environ: Mapping[str, str] | None = None) -> RuntimeSettings:
        """From the merged settings blocks: top-level ``device``, ``image``, ``interpreter``, ``env``,
        ``visible_devices``, ``shm_size`` and the ``docker`` and ``slurm`` blocks, over ``environ``."""
        image = given.get("image")
        return cls(device=str(given.get("device") or "auto"), image=str(image) if image else None,
                   local=local_settings(given), docker=docker_settings(given, environ), slurm=slurm_settings(given, environ))

    def with_checked(self, facts: RuntimeFacts) -> RuntimeSettings:
        """These settings with what the runtime's check found."""
        return replace(self, checked=facts)

    def gpu_request(self) -> GpuRequest:
        """What the run's monitors are told of the GPUs it may use."""
        return GpuRequest(runtime=self.checked.name if self.checked else None, visible=self.local.visible_devices,
                          environment_visible=self.local.environment().get("CUDA_VISIBLE_DEVICES"))
