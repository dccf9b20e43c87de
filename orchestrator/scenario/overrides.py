"""``--set key=value`` and smoke overrides: dotted keys into the scenario document."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

import yaml

from orchestrator.errors import BadInput
from orchestrator.scenario.safe_yaml import YAMLLimitError, load_bounded
from orchestrator.schemas import load_schema

MAX_VALUE_CHARS = 4096  # one --set value
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*")
DEFAULT_SMOKE = {
    "workload.dataset.samples": 192,
    "workload.batch.size": 32,
    "workload.epochs": 1,
    "workload.warmup_steps": 2,
    "measurement.window_steps": 1,
}


def parse_assignment(text: str) -> tuple[str, Any]:
    """'workload.batch.size=64' -> ('workload.batch.size', 64); values are YAML scalars or lists."""
    if "=" not in text:
        raise BadInput(f"--set {text}: expected key=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise BadInput(f"--set {text[:80]}: empty key")
    if not KEY.fullmatch(key):
        raise BadInput(f"--set {key[:80]!r}: not a dotted key of names (letters, digits, '_' and '-', e.g. workload.batch.size)")
    if len(raw) > MAX_VALUE_CHARS:
        raise BadInput(f"--set {key}: value longer than {MAX_VALUE_CHARS} characters")
    try:
        value = load_bounded(raw) if raw.strip() else ""
    except YAMLLimitError as exc:
        raise BadInput(f"--set {key}: value refused: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise BadInput(f"--set {key}: value is not valid YAML ({exc.__class__.__name__})") from None
    return key, value


@cache
def sections() -> frozenset[str]:
    """The top-level keys of a scenario (from its schema)."""
    return frozenset(load_schema("scenario")["properties"])


def qualify(key: str) -> str:
    """Keys that do not start with a top-level key of the scenario are taken as workload keys ('batch.size')."""
    return key if key.split(".", 1)[0] in sections() else f"workload.{key}"


def apply(document: dict[str, Any], assignments: Iterable[tuple[str, Any]], origin: str) -> dict[str, Any]:
    """Return a copy with every dotted key set, in order (a later one wins); intermediate mappings must exist or are created."""
    out = copy.deepcopy(document)
    for raw_key, value in assignments:
        key = qualify(raw_key)
        parts = key.split(".")
        node: Any = out
        for depth, part in enumerate(parts[:-1]):
            if not isinstance(node, dict):
                raise BadInput(f"{origin} {key}: '{'.'.join(parts[:depth])}' is not a mapping")
            node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise BadInput(f"{origin} {key}: '{'.'.join(parts[:-1])}' is not a mapping")
        node[parts[-1]] = value
    return out
