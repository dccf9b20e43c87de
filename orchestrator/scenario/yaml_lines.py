"""Parse YAML keeping the line of every mapping key, so errors can name a line."""

from __future__ import annotations

from typing import Any

import yaml


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}'", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse(text: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Return the document and a map from key path to 1-based line number."""
    document = yaml.load(text, Loader=_LineLoader)
    lines: dict[tuple[str, ...], int] = {}
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is not None:
        _walk(node, (), lines)
    return document, lines


def _walk(node: yaml.Node, path: tuple[str, ...], lines: dict[tuple[str, ...], int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key_path = (*path, str(key_node.value))
            lines[key_path] = key_node.start_mark.line + 1
            _walk(value_node, key_path, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            item_path = (*path, str(index))
            lines[item_path] = item.start_mark.line + 1
            _walk(item, item_path, lines)


def line_of(lines: dict[tuple[str, ...], int], dotted: str) -> int | None:
    """The line of the deepest known prefix of ``dotted``."""
    parts = tuple(p for p in dotted.split(".") if p)
    while parts:
        if parts in lines:
            return lines[parts]
        parts = parts[:-1]
    return None
