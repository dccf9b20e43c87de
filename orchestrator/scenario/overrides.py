"""``--set key=value`` and smoke overrides: dotted keys into the scenario document."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from orchestrator.errors import BadInput

SECTIONS = ("workload", "matrix", "measurement", "engines", "smoke", "description", "name")
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
        raise BadInput(f"--set {text}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise BadInput(f"--set {key}: value is not valid YAML ({exc.__class__.__name__})") from None
    return key, value


def qualify(key: str) -> str:
    """Keys that do not start with a section are taken as workload keys ('batch.size')."""
    return key if key.split(".", 1)[0] in SECTIONS else f"workload.{key}"


def apply(document: dict[str, Any], assignments: dict[str, Any], origin: str) -> dict[str, Any]:
    """Return a copy with every dotted key set; intermediate mappings must exist or are created."""
    out = copy.deepcopy(document)
    for raw_key, value in assignments.items():
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
