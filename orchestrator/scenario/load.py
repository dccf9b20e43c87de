"""Load a scenario file: YAML (with line numbers) -> schema -> overrides -> typed Scenario -> semantic checks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from orchestrator.data.sources import check_workload_dataset
from orchestrator.engines.registry import discover
from orchestrator.errors import BadInput
from orchestrator.model.initweights import shared_archs
from orchestrator.model.layers import known_archs
from orchestrator.paths import scenarios_dir
from orchestrator.scenario import overrides as ov
from orchestrator.scenario.bounds import check_matrix_size, check_numbers
from orchestrator.scenario.runtime_check import check_runtime_blocks
from orchestrator.scenario.safe_yaml import MAX_BYTES, YAMLLimitError
from orchestrator.scenario.scenario import Scenario
from orchestrator.scenario.yaml_lines import line_of, parse
from orchestrator.schemas import SchemaError, validate

# Names that belong to the workload (parity) and may never appear in an engine block.
PARITY_FIELDS = frozenset(
    {
        "mode", "model", "arch", "num_classes", "input", "height", "width", "channels", "dataset",
        "batch", "batch_size", "drop_last", "epochs", "steps", "optimizer", "lr", "momentum",
        "weight_decay", "nesterov", "loss", "precision", "precisions", "seed", "warmup_steps",
        "data_placement", "devices", "samples",
    }
)


def resolve_scenario_path(name_or_path: str) -> Path:
    """A path, or the name of a bundled scenario ('cifar_resnet50')."""
    path = Path(name_or_path)
    if path.exists():
        return path
    bundled = scenarios_dir() / f"{name_or_path}.yaml"
    if bundled.exists():
        return bundled
    raise BadInput(f"{name_or_path}: scenario file not found")


def _read(path: Path) -> str:
    """The text of a regular file of at most MAX_BYTES (checked before reading, and while reading)."""
    if path.is_dir():
        raise BadInput(f"{path}: is a folder, not a scenario file")
    try:
        if not path.is_file():
            raise BadInput(f"{path}: not a regular file")
        if path.stat().st_size > MAX_BYTES:
            raise BadInput(f"{path}: refused: {path.stat().st_size} bytes, more than the {MAX_BYTES} a scenario may have")
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise BadInput(f"{path}: refused: more than the {MAX_BYTES} bytes a scenario may have")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read ({exc.__class__.__name__}: {getattr(exc, 'strerror', None) or exc})") from None


def _parse(path: Path, text: str) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    try:
        document, lines = parse(text)
    except YAMLLimitError as exc:
        where = f":{exc.problem_mark.line + 1}" if exc.problem_mark is not None else ""
        raise BadInput(f"{path}{where}: refused: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInput(f"{path}{where}: malformed YAML: {problem}") from None
    if not isinstance(document, dict):
        raise BadInput(f"{path}: a scenario must be a YAML mapping")
    return document, lines


def _check_document(path: Path, document: dict[str, Any], lines: dict[tuple[str, ...], int] | None) -> None:
    """Bounded numbers, no parity field per engine, then the schema. ``lines``: None after the overrides (no line to name)."""
    check_numbers(document, str(path) if lines is not None else f"{path}: after overrides")
    _check_engine_blocks(path, document.get("engines"), lines or {})
    try:
        validate(document, "scenario")
    except SchemaError as exc:
        if lines is None:
            raise BadInput(f"{path}: after overrides: {exc.where}: {exc.detail}") from None
        line = line_of(lines, exc.where) if exc.where else None
        where = f"{path}:{line}" if line else str(path)
        raise BadInput(f"{where}: {exc.where or 'scenario'}: {exc.detail}") from None


def _check_engine_blocks(path: Path, blocks: object, lines: dict[tuple[str, ...], int]) -> None:
    """Parity fields may not be set per engine (``blocks``: the document's ``engines``, before its schema check)."""
    if not isinstance(blocks, dict):
        return
    known = discover()
    for engine, block in blocks.items():
        where = f"engines.{engine}"
        if engine not in known:
            raise BadInput(f"{path}: {where}: unknown engine '{engine}' (known: {', '.join(sorted(known))})")
        if not isinstance(block, dict):
            continue
        options = block.get("options") or {}
        for key in list(block) + [f"options.{k}" for k in (options if isinstance(options, dict) else {})]:
            leaf = key.split(".")[-1]
            if leaf in PARITY_FIELDS:
                line = line_of(lines, f"{where}.{key}")
                loc = f"{path}:{line}" if line else str(path)
                raise BadInput(
                    f"{loc}: {where}.{key}: '{leaf}' is a parity field; set it once under workload, not per engine"
                )


def _semantic_checks(scenario: Scenario) -> None:
    """The rules the schema cannot say: known engines and models, the length for training, batches within the data."""
    path, workload, matrix = scenario.source, scenario.workload, scenario.matrix
    engines = discover()
    for index, engine in enumerate(matrix.engines):
        if engine not in engines:
            raise BadInput(f"{path}: matrix.engines.{index}: unknown engine '{engine}' (known: {', '.join(sorted(engines))})")
    arch = workload.model.arch
    if arch not in known_archs():
        raise BadInput(f"{path}: workload.model.arch: unknown model '{arch}' (known: {', '.join(known_archs())})")
    if workload.mode == "train" and workload.epochs is None:
        raise BadInput(f"{path}: workload.epochs: required for mode 'train'")
    if workload.batch.max_search and matrix.batch_sizes:
        raise BadInput(f"{path}: workload.batch.max_search: cannot be combined with matrix.batch_sizes")
    _check_global_batches(scenario)
    if workload.init == "shared" and arch not in shared_archs():
        raise BadInput(f"{path}: workload.init: shared initial weights exist for {', '.join(shared_archs())} only, not {arch!r}")
    _check_warmup(scenario)
    check_workload_dataset(workload.to_json(), f"{path}: workload")
    for engine, block in scenario.engines.items():
        engines[engine].check_options(dict(block.options), f"{path}: engines.{engine}.options")
    for index, claim in enumerate(scenario.claims.ratios if scenario.claims else ()):
        for key in ("engine", "vs"):
            if getattr(claim, key) not in engines:
                raise BadInput(f"{path}: claims.ratios.{index}.{key}: unknown engine '{getattr(claim, key)}' "
                               f"(known: {', '.join(sorted(engines))})")


def _cells(scenario: Scenario) -> list[tuple[int, int]]:
    """(batch, devices) of every cell whose batch size is known before running; none without a sample count."""
    if scenario.workload.dataset.samples is None or scenario.workload.batch.max_search:
        return []
    return [(batch, devices) for batch in scenario.batch_sizes for devices in scenario.matrix.devices]


def _check_global_batches(scenario: Scenario) -> None:
    """Every global batch (and every fixed number of steps of it) within the dataset's samples."""
    path, workload, samples = scenario.source, scenario.workload, scenario.workload.dataset.samples or 0
    for batch, devices in _cells(scenario):
        global_batch = batch * devices
        if global_batch > samples:
            raise BadInput(f"{path}: workload.batch.size: global batch {global_batch} ({batch} x {devices} devices) "
                           f"exceeds workload.dataset.samples ({samples})")
        if workload.steps and workload.steps * global_batch > samples:
            raise BadInput(f"{path}: workload.steps: {workload.steps} steps of {global_batch} exceed the {samples} samples")


def _check_warmup(scenario: Scenario) -> None:
    """Warmup shorter than every plan's steps (where the sample count is known)."""
    workload, samples = scenario.workload, scenario.workload.dataset.samples or 0
    for batch, devices in _cells(scenario):
        epochs, per_epoch = workload.length(samples, batch * devices)
        total = epochs * per_epoch
        if total and workload.warmup_steps >= total:
            raise BadInput(f"{scenario.source}: workload.warmup_steps: {workload.warmup_steps} warmup steps leave none of the {total} "
                           f"steps of batch {batch} x {devices} device(s) to measure")


def load_scenario(name_or_path: str, sets: list[str] | None = None, smoke: bool = False) -> Scenario:
    """Load, check and apply overrides (smoke block first, then --set); raise BadInput on any problem."""
    path = resolve_scenario_path(name_or_path)
    document, lines = _parse(path, _read(path))
    _check_document(path, document, lines)
    applied = [*((document.get("smoke") or ov.DEFAULT_SMOKE).items() if smoke else ()), *map(ov.parse_assignment, sets or [])]
    if applied:
        document = ov.apply(document, applied, "--set")
        _check_document(path, document, None)
    scenario = Scenario.from_document(copy.deepcopy(document), path, smoke, tuple(applied))
    check_matrix_size(scenario.matrix, str(path))  # before any check that loops over the matrix
    _semantic_checks(scenario)
    check_runtime_blocks(scenario)
    return scenario
