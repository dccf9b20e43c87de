"""A scenario as a typed, frozen object, built once from its checked document.

The parts (``workload``, ``matrix``, ``measurement``, ``engines``, ``runtime``, ``claims``) are what callers
read. The document itself is kept for the file boundary only: the artifact's ``scenario.yaml`` records it
(run/execute.recorded_document). A derived scenario (a maximal batch probe's) replaces parts, not the document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.scenario.blocks import Claims, EngineBlock, Matrix, Measurement
from orchestrator.scenario.workload import Workload

NO_ENGINE_BLOCK = EngineBlock()


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: its typed parts, where it came from, and the overrides applied (key, value) in order."""

    name: str
    workload: Workload
    matrix: Matrix
    measurement: Measurement
    engines: Mapping[str, EngineBlock]
    runtime: Mapping[str, Mapping[str, Any]]  # runtime.<name>: that runtime's settings, checked by the runtime
    claims: Claims | None
    description: str
    document: dict[str, Any]  # the file boundary: what the artifact's scenario.yaml records
    source: Path
    smoke: bool = False
    overrides: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_document(cls, document: dict[str, Any], source: Path, smoke: bool = False,
                      overrides: tuple[tuple[str, Any], ...] = ()) -> Scenario:
        """The scenario of a schema-valid document; BadInput naming the field when a part's own check fails."""
        try:
            return cls(
                name=document["name"], workload=Workload.from_json(document["workload"]), matrix=Matrix.from_json(document["matrix"]),
                measurement=Measurement.from_json(document.get("measurement") or {}),
                engines=MappingProxyType({name: EngineBlock.from_json(block) for name, block in (document.get("engines") or {}).items()}),
                runtime=MappingProxyType({name: MappingProxyType(dict(block)) for name, block in (document.get("runtime") or {}).items()}),
                claims=Claims.from_json(document["claims"]) if document.get("claims") else None,
                description=document.get("description", ""), document=document, source=source, smoke=smoke, overrides=overrides,
            )
        except ValueError as exc:
            raise BadInput(f"{source}: {exc}") from None

    def engine_block(self, engine: str) -> EngineBlock:
        """``engines.<engine>`` (empty when the scenario has none)."""
        return self.engines.get(engine, NO_ENGINE_BLOCK)

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        """The batch sizes of the matrix: ``matrix.batch_sizes``, else the workload's."""
        return self.matrix.batch_sizes or (self.workload.batch.size,)
