"""What an engine reports of its run, as typed records: the result's ``work``, ``environment`` and ``failure`` blocks.

An engine fills a :class:`Readback` from its live objects, a :class:`PrecisionReport` and one
:class:`Switch` per optimization; the entrypoint adds what the loop counted and builds the
:class:`Work` record. :func:`as_json` turns any of them into the document
``schemas/engine-result.schema.json`` describes (the wire format): a field named ``class_`` is
written ``class``, a field marked :data:`OMIT_NONE` is left out while it is None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from bench_engine.weights import WeightChange

OMIT_NONE = {"omit_none": True}  # field metadata: no key in the document while the value is None


def as_json(value: Any) -> Any:
    """``value`` as JSON: dataclasses and NamedTuples as objects, tuples as lists, mappings key by key."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name.removesuffix("_"): as_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("omit_none") and getattr(value, f.name) is None)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: as_json(item) for name, item in zip(value._fields, value, strict=True)}
    if isinstance(value, list | tuple):
        return [as_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: as_json(item) for key, item in value.items()}
    return value


class Switch(NamedTuple):
    """One optimization of ``work.optimizations``: whether it is in effect, and why."""

    applied: bool
    detail: str


Switches = dict[str, Switch]  # switch name -> Switch, in the order the engine decided them


class Observed(NamedTuple):
    """Dtypes seen in one traced step (``work.observed``)."""

    compute_dtype: str
    grad_dtype: str | None
    logits_dtype: str


class Traced(NamedTuple):
    """What one traced step shows: the input as the model took it, the classes of its logits, the dtypes."""

    input_shape: tuple[int, ...]  # H, W, C
    num_classes: int
    observed: Observed


class InitReadback(NamedTuple):
    """Where training starts from (``work.init``): bench's shared weights (their read-back hash) or the framework's."""

    mode: str
    sha256: str | None = None


FRAMEWORK_INIT = InitReadback("framework", None)


@dataclass(frozen=True)
class OptimizerReadback:
    """``work.optimizer``, read from the live optimizer object; fields that do not apply are None."""

    name: str
    class_: str
    lr: float | None
    weight_decay: float
    momentum: float | None = None
    nesterov: bool | None = None
    betas: tuple[float, ...] | None = None
    eps: float | None = None
    fused: bool | None = field(default=None, metadata=OMIT_NONE)
    capturable: bool | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class LossReadback:
    """``work.loss``, read from the loss the step uses."""

    name: str
    class_: str
    reduction: str
    label_smoothing: float


@dataclass(frozen=True)
class PrecisionReport:
    """``work.precision``: the policy really in effect."""

    name: str
    compute_dtype: str
    param_dtype: str
    tf32_matmul: bool
    tf32_conv: bool
    loss_scaling: bool | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class Readback:
    """What the engine read back from its built objects (docs/engine-contract.md, section 2)."""

    mode: str | None = None
    arch: str | None = None
    num_classes: int | None = None
    input_shape: tuple[int, ...] | None = None
    param_dtypes: tuple[str, ...] | None = None
    observed: Observed | None = None
    optimizer: OptimizerReadback | None = None  # None for inference
    loss: LossReadback | None = None  # None for inference
    init: InitReadback | None = None
    steps_per_dispatch: int | None = None


@dataclass(frozen=True)
class Work:
    """The result's ``work`` block: the read-back fields, then what the loop counted."""

    mode: str | None = field(default=None, metadata=OMIT_NONE)
    arch: str | None = field(default=None, metadata=OMIT_NONE)
    num_classes: int | None = field(default=None, metadata=OMIT_NONE)
    input_shape: tuple[int, ...] | None = field(default=None, metadata=OMIT_NONE)
    param_dtypes: tuple[str, ...] | None = field(default=None, metadata=OMIT_NONE)
    observed: Observed | None = field(default=None, metadata=OMIT_NONE)
    optimizer: OptimizerReadback | None = None  # always written: null for inference
    loss: LossReadback | None = None
    init: InitReadback | None = field(default=None, metadata=OMIT_NONE)
    steps_per_dispatch: int | None = field(default=None, metadata=OMIT_NONE)
    trainable_parameters: int = 0
    dataset_sha256: str = ""
    dataset_samples: int = 0
    batch_per_device: int = 1
    batch_global: int = 1
    world_size: int = 1
    drop_last: bool | None = field(default=None, metadata=OMIT_NONE)
    epochs: int = 0
    steps: int = 0
    samples: int = 0
    data_placement: str | None = field(default=None, metadata=OMIT_NONE)
    precision: PrecisionReport | None = field(default=None, metadata=OMIT_NONE)
    optimizations: Switches = field(default_factory=dict)
    weight_change: WeightChange | None = field(default=None, metadata=OMIT_NONE)

    @classmethod
    def of(cls, readback: Readback, **counted: Any) -> Work:
        """The work of ``readback`` plus the counted fields (keywords of this class)."""
        read = {f.name: getattr(readback, f.name) for f in dataclasses.fields(Readback)}
        return cls(**read, **counted)

    def to_json(self) -> Any:
        return as_json(self)


# ----------------------------------------------------------------------------- environment and failure


@dataclass(frozen=True)
class EnvironmentFacts:
    """What an engine sees inside its runtime (:meth:`bench_engine.api.Engine.environment`)."""

    framework_version: str
    device_kind: str  # cpu | cuda
    devices: tuple[str, ...]
    cuda: str | None = None
    cudnn: str | None = None
    driver: str | None = None
    extra: Mapping[str, Any] | None = None  # the engine's own facts (versions, flags), a per-engine mapping


@dataclass(frozen=True)
class Environment:
    """The result's ``environment`` block."""

    framework: str
    framework_version: str = "unknown"
    python: str = ""
    engine_version: str = ""
    cuda: str | None = None
    cudnn: str | None = None
    driver: str | None = None
    device_kind: str = "cpu"
    devices: tuple[str, ...] = ()
    extra: Mapping[str, Any] | None = field(default=None, metadata=OMIT_NONE)

    def seen(self, facts: EnvironmentFacts) -> Environment:
        """This block with what the engine saw inside its runtime."""
        return replace(self, framework_version=facts.framework_version, cuda=facts.cuda, cudnn=facts.cudnn, driver=facts.driver,
                       device_kind=facts.device_kind, devices=tuple(facts.devices), extra=facts.extra)


@dataclass(frozen=True)
class Failure:
    """The result's ``failure`` block."""

    kind: str  # oom | crash | unsupported | bad_spec | interrupted | stalled
    message: str
    traceback: str | None = field(default=None, metadata=OMIT_NONE)
