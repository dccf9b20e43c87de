"""The scenario's ``workload`` block (the parity fields) as typed, frozen objects.

Built once from a schema-valid block (:meth:`Workload.from_json`), checked when made (a
``ValueError`` naming the field, which loading turns into a one-line BadInput); ``to_json`` gives
the block back (defaults filled in) where a document is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from bench_engine.contract import Geometry
from orchestrator.model.initweights import init_mode

ADAM_BETAS = (0.9, 0.999)  # torch.optim.Adam / optax.adam / keras Adam defaults
ADAM_EPS = 1e-8  # torch and optax (keras defaults to 1e-7: the engines set it from the spec)


def _without_none(node: Any) -> Any:
    """``node`` with every None-valued key of its mappings left out (a document leaves an unset optional field out)."""
    if isinstance(node, dict):
        return {key: _without_none(value) for key, value in node.items() if value is not None}
    return node


@dataclass(frozen=True)
class ModelChoice:
    """``workload.model``: the architecture and its class count."""

    arch: str
    num_classes: int


@dataclass(frozen=True)
class DatasetChoice:
    """``workload.dataset``: which split of which dataset, from where, and how many samples (None: all)."""

    name: str
    source: str
    split: str
    samples: int | None = None


@dataclass(frozen=True)
class MaxSearch:
    """``workload.batch.max_search``: grow then bisect to the maximal batch, run at ``fraction`` of it."""

    fraction: float = 0.9
    start: int = 16
    limit: int = 4096
    granularity: int = 8
    probe_steps: int = 3

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MaxSearch:
        return cls(**{key: doc[key] for key in ("fraction", "start", "limit", "granularity", "probe_steps") if key in doc})


@dataclass(frozen=True)
class BatchSpec:
    """``workload.batch``: the per-device size, partial last batch dropped or not, and the optional search."""

    size: int
    drop_last: bool = True
    max_search: MaxSearch | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> BatchSpec:
        search = doc.get("max_search")  # an empty block asks for no search
        return cls(doc["size"], doc.get("drop_last", True), MaxSearch.from_json(search) if search else None)


@dataclass(frozen=True)
class Optimizer:
    """``workload.optimizer``: sgd (momentum, nesterov) or adam (betas, eps), weight decay coupled L2 in both."""

    name: str
    lr: float
    weight_decay: float = 0.0
    momentum: float = 0.0
    nesterov: bool = False
    betas: tuple[float, float] = ADAM_BETAS
    eps: float = ADAM_EPS

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Optimizer:
        given = {key: doc[key] for key in ("weight_decay", "momentum", "nesterov", "eps") if key in doc}
        return cls(doc["name"], doc["lr"], betas=tuple(doc.get("betas", ADAM_BETAS)), **given)

    def to_json(self) -> dict[str, Any]:
        """The spec's optimizer: every hyper-parameter of the named optimizer, defaults filled in."""
        if self.name == "adam":
            return {"name": "adam", "lr": self.lr, "betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}
        return {"name": self.name, "lr": self.lr, "momentum": self.momentum, "weight_decay": self.weight_decay,
                "nesterov": self.nesterov}


@dataclass(frozen=True)
class Workload:
    """What every engine does alike: mode, model, input, dataset, batch, length (epochs or steps), optimizer, ...

    ``init``: resolved (``shared`` or ``framework``; the file may leave it to the arch's default)."""

    mode: str
    model: ModelChoice
    input: Geometry
    dataset: DatasetChoice
    batch: BatchSpec
    optimizer: Optimizer
    loss: str
    seed: int
    warmup_steps: int
    init: str
    epochs: int | None = None
    steps: int | None = None
    data_placement: str = "device"

    def __post_init__(self) -> None:
        if self.epochs is not None and self.steps is not None:
            raise ValueError("workload.steps: give epochs or steps, not both")
        if self.epochs is None and self.steps is None:
            raise ValueError("workload.epochs: required for mode 'train'" if self.mode == "train" else "workload.steps: give epochs or steps")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Workload:
        """The workload of a schema-valid ``workload`` block."""
        model, shape, data = doc["model"], doc["input"], doc["dataset"]
        return cls(
            mode=doc["mode"], model=ModelChoice(model["arch"], model["num_classes"]),
            input=Geometry(shape["height"], shape["width"], shape["channels"]),
            dataset=DatasetChoice(data["name"], data["source"], data["split"], data.get("samples")),
            batch=BatchSpec.from_json(doc["batch"]), optimizer=Optimizer.from_json(doc["optimizer"]), loss=doc["loss"],
            seed=doc["seed"], warmup_steps=doc["warmup_steps"], init=init_mode(doc), epochs=doc.get("epochs"),
            steps=doc.get("steps"), data_placement=doc.get("data_placement", "device"),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``workload`` block, defaults filled in, unset optional fields left out (what ``scenario show --json`` prints)."""
        return _without_none({**asdict(self), "optimizer": self.optimizer.to_json()})

    def length(self, samples: int, global_batch: int) -> tuple[int, int]:
        """(epochs, steps per epoch) over ``samples`` at ``global_batch`` (steps: one epoch of that many)."""
        from bench_engine.schedule import steps_per_epoch

        if self.steps is not None:
            return 1, self.steps
        return self.epochs or 1, steps_per_epoch(samples, global_batch, self.batch.drop_last)
