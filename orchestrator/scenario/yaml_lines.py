"""Parse YAML (bounded, see :mod:`safe_yaml`) keeping the line of every mapping key, so errors can name a line."""

from __future__ import annotations

from typing import Any

import yaml

from orchestrator.scenario.safe_yaml import compose_bounded, construct


def parse(text: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Return the document and a map from key path to 1-based line number (raises yaml.YAMLError)."""
    loader, node = compose_bounded(text)
    lines: dict[tuple[str, ...], int] = {}
    if node is not None:
        _walk(node, lines)
    return construct(loader, node), lines


def _walk(root: yaml.Node, lines: dict[tuple[str, ...], int]) -> None:
    """Record the line of every key path; a node reached again through an alias is not walked again."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            items = [((*path, str(k.value)), k, v) for k, v in node.value]
        elif isinstance(node, yaml.SequenceNode):
            items = [((*path, str(i)), item, item) for i, item in enumerate(node.value)]
        else:
            continue
        for item_path, marker, _ in items:
            lines.setdefault(item_path, marker.start_mark.line + 1)
        # children pushed last-first: walked in document order, so an anchor is walked where it is written
        stack.extend((child, item_path) for item_path, _, child in reversed(items))


def line_of(lines: dict[tuple[str, ...], int], dotted: str) -> int | None:
    """The line of the deepest known prefix of ``dotted``."""
    parts = tuple(p for p in dotted.split(".") if p)
    while parts:
        if parts in lines:
            return lines[parts]
        parts = parts[:-1]
    return None
