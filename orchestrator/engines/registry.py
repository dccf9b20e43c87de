"""Engines are discovered from images/<name>/engine.yaml: adding one needs no edit here."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from bench_engine.precision import NAMES as PRECISION_NAMES
from orchestrator.engines.refusals import PlanFacts, RefuseRule, parse_rules
from orchestrator.errors import BadInput
from orchestrator.paths import images_dir
from orchestrator.schemas import describe_alternatives

COMMON_LIBRARY = "common"


@dataclass(frozen=True)
class EngineInfo:
    """What bench knows about an engine from its metadata file."""

    name: str
    framework: str
    module: str
    framework_module: str
    folder: Path
    precisions: tuple[str, ...]
    options_schema: dict[str, Any] = field(default_factory=dict)
    requirements: Path | None = None
    probe_import: bool = False  # the local runtime imports framework_module before a run (it can fail with a reason)
    build: bool = False  # a compiled engine: `bench env create` builds it instead of a venv
    refuse: tuple[RefuseRule, ...] = ()  # option combinations it cannot run (engine.yaml `refuse`)

    def python_path(self) -> list[Path]:
        """Folders the engine's interpreter needs on PYTHONPATH (engine library + adapter)."""
        return [images_dir() / COMMON_LIBRARY, self.folder]

    def check_options(self, options: dict[str, Any], where: str) -> None:
        """Validate engine options against the engine's own schema (BadInput naming the option)."""
        errors = list(Draft202012Validator(self.options_schema or {"type": "object"}).iter_errors(options))
        if errors:
            err = errors[0]
            key = ".".join(str(p) for p in err.absolute_path)
            if err.validator == "additionalProperties":
                extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
                raise BadInput(f"{where}.{'.'.join(extra)}: not an option of engine '{self.name}'")
            raise BadInput(f"{where}{'.' + key if key else ''}: {describe_alternatives(err) or err.message}")

    def refusal(self, facts: PlanFacts) -> str | None:
        """Why the engine refuses this plan (the first matching ``refuse`` rule), or None."""
        rule = next((rule for rule in self.refuse if rule.matches(facts)), None)
        return rule.message(self.name, facts) if rule is not None else None


def engine_metadata_files() -> list[Path]:
    """images/*/engine.yaml, plus engine folders listed in $BENCH_ENGINE_PATH (out-of-tree engines)."""
    files = sorted(images_dir().glob("*/engine.yaml"))
    for extra in filter(None, os.environ.get("BENCH_ENGINE_PATH", "").split(os.pathsep)):
        meta = Path(extra) / "engine.yaml"
        if not meta.is_file():
            raise BadInput(f"BENCH_ENGINE_PATH: {meta} not found")
        files.append(meta)
    return files


def _precisions(declared: Iterable[str] | None, meta_file: Path) -> tuple[str, ...]:
    """The precision names an engine supports (engine.yaml's ``precisions``, default fp32), each a name of bench_engine.precision."""
    precisions = tuple(declared if declared is not None else ["fp32"])
    unknown = sorted(set(precisions) - set(PRECISION_NAMES))
    if unknown:
        raise BadInput(f"{meta_file}: precisions: {', '.join(unknown)} not a precision name (known: {', '.join(PRECISION_NAMES)})")
    return precisions


@cache
def discover() -> dict[str, EngineInfo]:
    """All engines under images/ (and $BENCH_ENGINE_PATH) that carry an engine.yaml."""
    engines: dict[str, EngineInfo] = {}
    for meta_file in engine_metadata_files():
        meta = yaml.safe_load(meta_file.read_text()) or {}
        folder = meta_file.parent
        requirements = folder / meta["requirements"] if meta.get("requirements") else None
        precisions = _precisions(meta.get("precisions"), meta_file)
        options_schema = meta.get("options") or {}
        engines[meta["name"]] = EngineInfo(
            name=meta["name"],
            framework=meta.get("framework", meta["name"]),
            module=meta["module"],
            framework_module=meta.get("framework_module", meta["module"]),
            folder=folder,
            precisions=precisions,
            options_schema=options_schema,
            requirements=requirements,
            probe_import=bool(meta.get("probe_import")),
            build=bool(meta.get("build")),
            refuse=parse_rules(meta, meta_file, options_schema, precisions),
        )
    return engines


def get_engine(name: str, where: str = "engine") -> EngineInfo:
    engines = discover()
    if name not in engines:
        raise BadInput(f"{where}: unknown engine '{name}' (known: {', '.join(sorted(engines))})")
    return engines[name]
