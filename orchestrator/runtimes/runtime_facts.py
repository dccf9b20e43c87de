"""What a runtime says of one run, for the run record's ``runtime`` block: :class:`RuntimeFacts`.

A runtime's ``check`` returns the facts it found before any run (the interpreter, the image and its
digests, the GPUs a container gets, ...); its ``execute`` returns those of the run itself (the
container's options as inspected, the Slurm job and its node, ...). The record holds both, the run's
over the check's (:meth:`RuntimeFacts.merged`); the JSON block appears only in :meth:`RuntimeFacts.to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from orchestrator.imagebuild.facts import ImageFacts


@dataclass(frozen=True)
class ContainerOptions:
    """The options of a run's container that matter, as ``docker inspect`` reported them (``docker_security``)."""

    id: str
    name: str
    user: str | None = None
    network_mode: str | None = None
    privileged: bool | None = None
    cap_drop: tuple[str, ...] | None = None
    cap_add: tuple[str, ...] | None = None
    security_opt: tuple[str, ...] | None = None
    ipc_mode: str | None = None
    shm_size: int | None = None
    readonly_rootfs: bool | None = None
    init: bool | None = None
    pids_limit: int | None = None
    memory: int | None = None
    nano_cpus: int | None = None
    tmpfs: tuple[tuple[str, str], ...] | None = None  # mount point -> options
    ulimits: tuple[tuple[str | None, int | None, int | None], ...] = ()  # (name, soft, hard)
    device_requests: tuple[tuple[str | None, int | None, tuple[str, ...] | None, tuple[tuple[str, ...], ...] | None], ...] = ()
    binds: tuple[str, ...] | None = None
    labels: tuple[tuple[str, str], ...] = ()  # the bench.* labels

    def to_json(self) -> dict[str, Any]:
        """The record's ``container`` block (the keys of ``docker inspect``'s options, lists as lists)."""
        return {
            **{f.name: _listed(getattr(self, f.name)) for f in fields(self)},
            "tmpfs": dict(self.tmpfs) if self.tmpfs is not None else None,
            "ulimits": [{"name": n, "soft": s, "hard": h} for n, s, h in self.ulimits],
            "device_requests": [{"driver": d, "count": c, "device_ids": _listed(ids), "capabilities": _listed(caps)}
                                for d, c, ids, caps in self.device_requests],
            "labels": dict(self.labels),
        }


def _listed(value: Any) -> Any:
    """Tuples (nested too) as lists, as JSON has them."""
    return [_listed(item) for item in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class RuntimeFacts:
    """The run record's runtime block: the runtime's name and what it knows of the run (None: not known here)."""

    name: str
    interpreter: str | None = None  # local, and slurm's local mode
    image: str | None = None  # docker, and slurm's container mode
    image_facts: ImageFacts | None = None  # docker: the image's id, base and its digest, version, revision
    gpus: str | int | None = None  # docker: the GPUs handed over ('all via nvidia'); slurm: GPUs asked for
    shm_size: str | None = None
    daemon: str | None = None  # the Docker daemon's version
    user: str | None = None  # the container's user
    notes: tuple[str, ...] = ()
    container: ContainerOptions | None = None
    mode: str | None = None  # slurm: local | container
    partition: str | None = None
    container_launcher: str | None = None  # slurm container mode: pyxis | apptainer
    job_id: str | None = None
    node: str | None = None
    pending_s: float | None = None
    run_s: float | None = None
    scheduler_state: str | None = None
    exit_code: str | None = None  # as Slurm reports it ('3:0')
    job_start: str | None = None  # slurm: the job's StartTime and EndTime as scontrol reports them (the cluster's local time)
    job_end: str | None = None
    node_type: str | None = None  # slurm: the node's kind as scontrol show node reports it (GRES, features, partitions)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("runtime facts name their runtime")

    def merged(self, later: RuntimeFacts) -> RuntimeFacts:
        """These facts with those ``later`` knows over them (its notes after these)."""
        given = {f.name: getattr(later, f.name) for f in fields(later) if getattr(later, f.name) not in (None, ())}
        if self.notes and later.notes:
            given["notes"] = (*self.notes, *later.notes)
        return replace(self, **given)

    def noted(self, note: str) -> RuntimeFacts:
        """These facts with one more note."""
        return replace(self, notes=(*self.notes, note))

    def to_json(self) -> dict[str, Any]:
        """The record's ``runtime`` block: the facts known (None and empty ones left out), the image's flattened in."""
        known = [(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) not in (None, ())]
        parts = [value.to_json() if isinstance(value, ImageFacts) else {name: _json(value)} for name, value in known]
        return {key: item for part in parts for key, item in part.items()}


def _json(value: Any) -> Any:
    """A fact as JSON has it: the container's block, lists for tuples."""
    return value.to_json() if isinstance(value, ContainerOptions) else _listed(value)
