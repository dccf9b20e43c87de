"""The JAX engine adapter: Flax ResNet, Optax SGD or Adam, jitted steps with asynchronous dispatch.

Paths: ``baseline`` jits forward+backward only and applies the Optax update eagerly outside
the jit (framework defaults); ``optimized`` jits the whole train step and donates the state
buffers (bench_jax.step). Data placement follows the spec: ``device`` keeps the normalised split
on the device and slices each batch inside the jitted step; ``host`` slices numpy batches and
transfers them every step. Several devices run data parallel in one process over a 1-D mesh
(bench_jax.prepare). jax is imported inside the methods, after the process settings it reads
at start-up are made (bench_jax.environment).
"""

from __future__ import annotations

from typing import Any

from bench_engine.api import Engine, Workload
from bench_engine.contract import RunSpec
from bench_engine.data import Dataset
from bench_engine.report import EnvironmentFacts


class JaxEngine(Engine):
    """Flax + Optax ResNet training and inference under ``jax.jit``."""

    name = "jax"
    framework = "JAX"

    def __init__(self) -> None:
        self._kind: str | None = None
        self._devices: list[Any] = []

    def _devices_for(self, spec: RunSpec) -> tuple[str, list[Any]]:
        """The device platform and its devices, configuring the process on first use."""
        if self._kind is None:
            from bench_jax.environment import configure_process, resolve_devices

            configure_process(spec)
            self._kind, self._devices = resolve_devices(spec.device)
        return self._kind, self._devices

    def is_out_of_memory(self, exc: BaseException) -> bool:
        """XLA's RESOURCE_EXHAUSTED / out of memory, also when wrapped in another exception."""
        seen: BaseException | None = exc
        for _ in range(5):
            if seen is None:
                return False
            if super().is_out_of_memory(seen):
                return True
            seen = seen.__cause__ or seen.__context__
        return False

    def environment(self, spec: RunSpec) -> EnvironmentFacts:
        kind, devices = self._devices_for(spec)
        from bench_jax.environment import describe

        return describe(kind, devices)

    def prepare(self, spec: RunSpec, data: Dataset) -> Workload:
        kind, devices = self._devices_for(spec)
        from bench_jax.prepare import build_workload

        return build_workload(spec, data, kind, devices)
