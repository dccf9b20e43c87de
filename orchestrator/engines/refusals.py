"""Option combinations an engine cannot run, declared in its engine.yaml ``refuse`` list.

A rule names explicit option values and, optionally, the precisions, optimizers, paths and
modes it applies to; a run plan of the matrix that matches every given field is refused before
anything runs (``orchestrator.scenario.matrix.expand``), with the rule's reason. ``auto`` values
never match a rule: with them the engine picks what runs and reports why in ``work.optimizations``.

    refuse:
      - options: {cuda_graphs: true, fused_optimizer: false}
        precisions: [fp16]
        reason: "..."
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from orchestrator.errors import BadInput

_NAMES = {"type": "array", "minItems": 1, "items": {"type": "string"}}
RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["options", "reason"],
    "properties": {
        "options": {"type": "object", "minProperties": 1},
        "precisions": _NAMES,
        "optimizers": _NAMES,
        "paths": {"type": "array", "minItems": 1, "items": {"enum": ["baseline", "optimized"]}},
        "modes": {"type": "array", "minItems": 1, "items": {"enum": ["train", "infer"]}},
        "reason": {"type": "string", "minLength": 1},
    },
}


@dataclass(frozen=True)
class PlanFacts:
    """What a rule can match on, for one run plan."""

    options: Mapping[str, Any]
    precision: str
    optimizer: str
    path: str
    mode: str


@dataclass(frozen=True)
class RefuseRule:
    """One ``refuse`` entry; empty tuples match anything."""

    options: Mapping[str, Any]
    reason: str
    precisions: tuple[str, ...] = ()
    optimizers: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()

    def matches(self, facts: PlanFacts) -> bool:
        if any(key not in facts.options or facts.options[key] != value or type(facts.options[key]) is not type(value)
               for key, value in self.options.items()):
            return False
        pairs = ((self.precisions, facts.precision), (self.optimizers, facts.optimizer), (self.paths, facts.path),
                 (self.modes, facts.mode))
        return all(not allowed or value in allowed for allowed, value in pairs)

    def message(self, engine: str, facts: PlanFacts) -> str:
        """One line: the options named as the scenario sets them, what they meet, and why."""
        first, *rest = self.options.items()
        named = f"engines.{engine}.options.{first[0]}: {_yaml(first[1])}"
        named += "".join(f" with {key}: {_yaml(value)}" for key, value in rest)
        return f"{named} cannot run precision {facts.precision}, optimizer {facts.optimizer}, {facts.path} path: {self.reason}"


def _yaml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_rules(meta: Mapping[str, Any], source: Path, options_schema: Mapping[str, Any],
                precisions: tuple[str, ...]) -> tuple[RefuseRule, ...]:
    """The ``refuse`` list of an engine.yaml, checked: every option a rule names is one of the
    engine's options with a value its schema allows, every precision one the engine has."""
    entries = meta.get("refuse") or []
    if not isinstance(entries, list):
        raise BadInput(f"{source}: refuse: must be a list of rules")
    properties = options_schema.get("properties") or {}
    rules = []
    for index, entry in enumerate(entries):
        where = f"{source}: refuse.{index}"
        errors = list(Draft202012Validator(RULE_SCHEMA).iter_errors(entry))
        if errors:
            path = ".".join(str(p) for p in errors[0].absolute_path)
            raise BadInput(f"{where}{'.' + path if path else ''}: {errors[0].message}")
        for key, value in entry["options"].items():
            if key not in properties:
                raise BadInput(f"{where}.options.{key}: not an option of this engine")
            problem = next(Draft202012Validator(properties[key]).iter_errors(value), None)
            if problem is not None or value == "auto":
                raise BadInput(f"{where}.options.{key}: {value!r} is not an explicit value of the option")
        unknown = sorted(set(entry.get("precisions", [])) - set(precisions))
        if unknown:
            raise BadInput(f"{where}.precisions: {', '.join(unknown)} not among the engine's precisions")
        rules.append(RefuseRule(options=dict(entry["options"]), reason=entry["reason"],
                                precisions=tuple(entry.get("precisions", ())), optimizers=tuple(entry.get("optimizers", ())),
                                paths=tuple(entry.get("paths", ())), modes=tuple(entry.get("modes", ()))))
    return tuple(rules)
