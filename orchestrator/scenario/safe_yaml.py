"""Bounded YAML: a scenario (or a ``--set`` value) is refused before anything is expanded when it is
too large, nested too deep, uses too many aliases, or would expand beyond a node budget.

PyYAML composes a document into a node graph in which an alias is the anchored node itself, so a
2 KB "billion laughs" file is a small graph that only explodes when something walks it as a tree.
Here the composer counts alias uses and nesting depth while it composes, then the graph is measured
once (memoized, no expansion) for its expanded size and depth and for recursive aliases; only a
document within every bound is constructed. Values are JSON-like: mappings with string keys,
lists, strings, numbers, booleans and null (timestamps stay strings; binary, sets and other
tagged types are refused).
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_BYTES = 64 << 10  # a scenario is a few KB; 64 KiB of YAML parse in well under a second
MAX_DEPTH = 40  # nesting levels, counted in the text and again as expanded through aliases
MAX_ALIASES = 100  # alias uses (``*name``) in one document
MAX_NODES = 2_000  # values of the document, counted as composed and again with every alias expanded


class YAMLLimitError(yaml.YAMLError):
    """The document exceeds a bound; ``problem_mark`` (may be None) says where."""

    def __init__(self, problem: str, mark: yaml.Mark | None = None):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


def _refuse(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(None, None, f"the YAML type {node.tag} is not allowed (only JSON-like values)", node.start_mark)


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that bounds depth and aliases while composing, and refuses duplicate or non-string keys."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YAMLLimitError(f"more than {MAX_ALIASES} aliases", self.peek_event().start_mark)
        else:
            self._nodes += 1
            if self._nodes > MAX_NODES:
                raise YAMLLimitError(f"more than {MAX_NODES} values", self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YAMLLimitError(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is not a string (quote it)", key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


for _tag in ("binary", "set", "omap", "pairs"):
    BoundedLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)
# Dates and times stay strings: every value of a scenario must survive a JSON round trip.
BoundedLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_expansion(root: yaml.Node) -> None:
    """Raise YAMLLimitError when the graph, expanded as a tree, is recursive, too large or too deep.

    Iterative and memoized: each node is measured once, whatever the number of aliases to it.
    """
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, expanded depth)
    path: set[int] = set()  # nodes being measured: the current path from the root
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids = _children(node)
        if done:
            path.discard(key)
            size = 1 + sum(measured[id(k)][0] for k in kids)
            depth = 1 + max((measured[id(k)][1] for k in kids), default=0)
            if size > MAX_NODES:
                raise YAMLLimitError(f"has more than {MAX_NODES} values (aliases expanded)", node.start_mark)
            if depth > MAX_DEPTH:
                raise YAMLLimitError(f"nested (through aliases) deeper than {MAX_DEPTH} levels", node.start_mark)
            measured[key] = (size, depth)
            continue
        if key in measured:
            continue
        path.add(key)
        stack.append((node, True))
        for kid in kids:
            if id(kid) in path:
                raise YAMLLimitError("recursive alias (a node that contains itself)", kid.start_mark)
            if id(kid) not in measured:
                stack.append((kid, False))


def compose_bounded(text: str) -> tuple[BoundedLoader, yaml.Node | None]:
    """Compose one document within every bound; the loader then constructs it (see :func:`load_bounded`)."""
    if len(text) > MAX_BYTES:
        raise YAMLLimitError(f"{len(text)} characters, more than the {MAX_BYTES} allowed")
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
    except BaseException:
        loader.dispose()
        raise
    if node is not None:
        check_expansion(node)
    return loader, node


def construct(loader: BoundedLoader, node: yaml.Node | None) -> Any:
    """Build the Python value of a composed (and checked) document."""
    try:
        return None if node is None else loader.construct_document(node)
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4300 digits, a date out of range
        raise YAMLLimitError(f"unreadable value ({exc})", getattr(node, "start_mark", None)) from None
    finally:
        loader.dispose()


def load_bounded(text: str) -> Any:
    """``yaml.safe_load`` with the bounds of this module (raises yaml.YAMLError)."""
    loader, node = compose_bounded(text)
    return construct(loader, node)
