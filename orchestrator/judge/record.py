"""The run record (``run.json``) as a typed, frozen object: the orchestrator's verdict on one run.

Like pyperf's ``Run``: immutable, checked when it is made, JSON only at the file boundary
(``from_json`` of a schema-valid ``run.json``, ``to_json`` when it is written; the wire format is
``schemas/run-record.schema.json``). A change of verdict (tampering, cross-engine parity) makes a
new record with :meth:`RunRecord.invalidated`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

STATUSES = ("ok", "invalid", "failed", "timeout", "interrupted", "skipped")


@dataclass(frozen=True)
class Mismatch:
    """One field of the work that differs from what was asked (by the spec, or by another engine's run)."""

    field: str
    expected: Any
    actual: Any
    against: str = "spec"

    def __post_init__(self) -> None:
        if not self.field:
            raise ValueError("a parity mismatch names its field")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Mismatch:
        return cls(doc["field"], doc["expected"], doc["actual"], doc.get("against", "spec"))

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "expected": self.expected, "actual": self.actual, "against": self.against}

    def words(self) -> str:
        """'steps expected 10 got 5' (and 'vs <run>' when the other side is not the spec)."""
        against = f" vs {self.against}" if self.against != "spec" else ""
        return f"{self.field} expected {self.expected!r} got {self.actual!r}{against}"


@dataclass(frozen=True)
class ParityVerdict:
    """Whether the result was checked against its spec (and the other engines), and what differed."""

    checked: bool = False
    ok: bool = False
    mismatches: tuple[Mismatch, ...] = ()

    def __post_init__(self) -> None:
        if self.ok and (self.mismatches or not self.checked):
            raise ValueError("a parity verdict is ok only when checked and without mismatches")

    @classmethod
    def of(cls, mismatches: Sequence[Mismatch]) -> ParityVerdict:
        """The verdict of a check that ran."""
        return cls(True, not mismatches, tuple(mismatches))

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ParityVerdict:
        return cls(bool(doc["checked"]), bool(doc["ok"]), tuple(Mismatch.from_json(m) for m in doc["mismatches"]))

    def to_json(self) -> dict[str, Any]:
        return {"checked": self.checked, "ok": self.ok, "mismatches": [m.to_json() for m in self.mismatches]}


def describe_mismatches(mismatches: Sequence[Mismatch]) -> str:
    """The first three parity mismatches in words, and how many more."""
    more = f" (+{len(mismatches) - 3} more)" if len(mismatches) > 3 else ""
    return "parity: " + "; ".join(m.words() for m in mismatches[:3]) + more


@dataclass(frozen=True)
class RunRecord:
    """One run's record: which cell of the matrix, how it ran, its status and the parity verdict."""

    run_id: str
    engine: str
    precision: str
    path: str
    batch_per_device: int
    devices: int
    repeat: int
    status: str
    reason: str | None
    runtime: Mapping[str, Any]  # the runtime's own facts (name, interpreter, image, job...): they differ by runtime
    started_at: str
    finished_at: str
    wall_s: float
    exit_code: int | None = None
    parity: ParityVerdict = field(default_factory=ParityVerdict)
    throughput: float | None = None
    apparent_throughput: float | None = None
    telemetry: Mapping[str, Any] | None = None  # what the run monitors observed (host/telemetry.py)
    host: Mapping[str, Any] | None = None  # the host state around the run (host/provenance.py)
    schema_version: int = 1

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"run {self.run_id}: status {self.status!r} is not one of {', '.join(STATUSES)}")
        if "name" not in self.runtime:
            raise ValueError(f"run {self.run_id}: the runtime block names its runtime")
        if self.batch_per_device < 1 or self.devices < 1 or self.repeat < 1:
            raise ValueError(f"run {self.run_id}: batch, devices and repeat are positive")
        if self.wall_s < 0:
            raise ValueError(f"run {self.run_id}: negative wall time {self.wall_s}")
        if self.throughput is not None and self.status != "ok":
            raise ValueError(f"run {self.run_id}: a {self.status} run has no throughput (its apparent one at most)")

    @property
    def group(self) -> tuple[str, str, str, int, int]:
        """The statistics group: engine, precision, path, per-device batch, devices."""
        return (self.engine, self.precision, self.path, self.batch_per_device, self.devices)

    @property
    def cell(self) -> tuple[str, str, int, int]:
        """The cross-engine comparison cell: precision, path, per-device batch, devices."""
        return (self.precision, self.path, self.batch_per_device, self.devices)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.precision} {self.path} b{self.batch_per_device} x{self.devices} #{self.repeat}"

    def invalidated(self, reason: str, mismatches: Sequence[Mismatch] = ()) -> RunRecord:
        """This record made ``invalid``: its throughput kept as apparent, ``mismatches`` added to its parity."""
        parity = self.parity
        if mismatches:
            parity = ParityVerdict(parity.checked, False, parity.mismatches + tuple(mismatches))
        apparent = self.throughput if self.throughput is not None else self.apparent_throughput
        return replace(self, status="invalid", reason=reason, throughput=None, apparent_throughput=apparent, parity=parity)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunRecord:
        """The record of a schema-valid ``run.json``."""
        return cls(
            run_id=doc["run_id"], engine=doc["engine"], precision=doc["precision"], path=doc["path"],
            batch_per_device=doc["batch_per_device"], devices=doc["devices"], repeat=doc["repeat"], status=doc["status"],
            reason=doc.get("reason"), runtime=dict(doc["runtime"]), started_at=doc["started_at"], finished_at=doc["finished_at"],
            wall_s=doc["wall_s"], exit_code=doc.get("exit_code"), parity=ParityVerdict.from_json(doc["parity"]),
            throughput=doc.get("throughput"), apparent_throughput=doc.get("apparent_throughput"),
            telemetry=dict(doc["telemetry"]) if doc.get("telemetry") is not None else None,
            host=dict(doc["host"]) if doc.get("host") is not None else None, schema_version=doc["schema_version"],
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema_version": self.schema_version, "run_id": self.run_id, "engine": self.engine, "precision": self.precision,
            "path": self.path, "batch_per_device": self.batch_per_device, "devices": self.devices, "repeat": self.repeat,
            "status": self.status, "reason": self.reason, "exit_code": self.exit_code, "runtime": dict(self.runtime),
            "started_at": self.started_at, "finished_at": self.finished_at, "wall_s": self.wall_s,
            "parity": self.parity.to_json(), "throughput": self.throughput, "apparent_throughput": self.apparent_throughput,
        }
        if self.telemetry is not None:
            doc["telemetry"] = dict(self.telemetry)
        if self.host is not None:
            doc["host"] = dict(self.host)
        return doc
