"""The scenario's ``matrix``, ``measurement``, ``engines.<name>`` and ``claims`` blocks as typed, frozen objects.

Each is built once from its schema-valid block (``from_json``) and checked when made (a ``ValueError``
naming the field, which loading turns into a one-line BadInput). Engine options and runtime settings
stay mappings: their content differs by engine and runtime (each checks its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

DEFAULT_PATHS = ("optimized",)


@dataclass(frozen=True)
class Matrix:
    """``matrix``: the axes. ``batch_sizes`` empty: the workload's batch size; ``reference`` None: the first engine."""

    engines: tuple[str, ...]
    precisions: tuple[str, ...]
    paths: tuple[str, ...] = DEFAULT_PATHS
    batch_sizes: tuple[int, ...] = ()
    devices: tuple[int, ...] = (1,)
    repeats: int = 1
    reference: str | None = None

    def __post_init__(self) -> None:
        if not self.engines:
            raise ValueError("matrix.engines: at least one engine")
        if self.reference is not None and self.reference not in self.engines:
            raise ValueError(f"matrix.reference: '{self.reference}' is not one of matrix.engines ({', '.join(self.engines)})")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Matrix:
        return cls(tuple(doc["engines"]), tuple(doc["precisions"]), tuple(doc.get("paths") or DEFAULT_PATHS),
                   tuple(doc.get("batch_sizes") or ()), tuple(doc.get("devices") or (1,)), doc.get("repeats") or 1,
                   doc.get("reference"))

    @property
    def reference_engine(self) -> str:
        """The engine cross-engine ratios are taken against."""
        return self.reference or self.engines[0]


@dataclass(frozen=True)
class TimeToTrain:
    """``measurement.time_to_train``: the epochs of samples the summary's hours-to-train figure is for."""

    epochs: int
    samples: int


@dataclass(frozen=True)
class Measurement:
    """``measurement``: how every run is timed and bounded, defaults filled in."""

    window_steps: int = 10
    timeout_s: float = 3600.0
    max_step_samples: int = 20000
    stall_s: float = 300.0
    setup_stall_s: float = 900.0
    time_to_train: TimeToTrain | None = None

    def __post_init__(self) -> None:
        for name in ("window_steps", "timeout_s", "max_step_samples", "stall_s", "setup_stall_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"measurement.{name}: {getattr(self, name)} is not positive")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Measurement:
        given = {key: doc[key] for key in ("window_steps", "max_step_samples") if key in doc}
        given.update({key: float(doc[key]) for key in ("timeout_s", "stall_s", "setup_stall_s") if key in doc})
        estimate = doc.get("time_to_train")
        return cls(**given, time_to_train=TimeToTrain(estimate["epochs"], estimate["samples"]) if estimate else None)


@dataclass(frozen=True)
class EngineBlock:
    """``engines.<name>``: the engine's options (its own schema), and where to run it (``interpreter``, ``image``)."""

    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    interpreter: str | None = None
    image: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> EngineBlock:
        return cls(MappingProxyType(dict(doc.get("options") or {})), doc.get("interpreter"), doc.get("image"))

    def runtime_settings(self) -> dict[str, str]:
        """The runtime settings the block gives (``interpreter``, ``image``)."""
        return {key: value for key, value in (("interpreter", self.interpreter), ("image", self.image)) if value is not None}


@dataclass(frozen=True)
class ClaimedRatio:
    """One published ratio: ``engine``'s throughput over ``vs``'s at ``precision`` on ``path``."""

    engine: str
    vs: str
    precision: str
    claimed: float
    path: str = "optimized"
    as_stated: str | None = None

    def __post_init__(self) -> None:
        if not self.claimed > 0:
            raise ValueError(f"claims.ratios: {self.engine} / {self.vs}: claimed ratio {self.claimed} is not positive")


@dataclass(frozen=True)
class Claims:
    """``claims``: published cross-engine ratios the scenario reproduces, where they were stated and measured."""

    source: str
    hardware: str
    ratios: tuple[ClaimedRatio, ...]
    note: str | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Claims:
        ratios = tuple(ClaimedRatio(r["engine"], r["vs"], r["precision"], r["claimed"], r.get("path", "optimized"), r.get("as_stated"))
                       for r in doc["ratios"])
        return cls(doc["source"], doc["hardware"], ratios, doc.get("note"))
