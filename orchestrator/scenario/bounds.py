"""Bounds a scenario document must keep before anything is expanded: finite numbers, integers that fit
in 64 bits, and a run matrix of at most MAX_RUNS runs (its size computed arithmetically, never by
expanding it). The per-field maxima live in schemas/scenario.schema.json; this module holds the rules
that apply to every value and to the matrix as a whole."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from orchestrator.errors import BadInput

MAX_RUNS = 4096  # runs in one expanded matrix (engines x precisions x paths x batch sizes x devices x repeats)
INT_BOUND = 2**63  # every integer of a scenario is in [-2**63, 2**63): an int64 in every engine and file name


def _leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(dotted path, value) of every scalar under ``node``; iterative, so depth cannot crash it."""
    stack: list[tuple[tuple[str, ...], Any]] = [(path, node)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(((*where, str(key)), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend(((*where, str(index)), item) for index, item in enumerate(value))
        else:
            yield where, value


def check_numbers(document: Any, origin: str) -> None:
    """BadInput naming the field of the first NaN, infinity, or integer outside the 64-bit range."""
    for where, value in _leaves(document):
        field = ".".join(where) or "scenario"
        if isinstance(value, bool):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise BadInput(f"{origin}: {field}: {value} is not a finite number")
        if isinstance(value, int) and not -INT_BOUND <= value < INT_BOUND:
            digits = len(str(abs(value))) if abs(value) < 10**4000 else "thousands of"
            raise BadInput(f"{origin}: {field}: an integer of {digits} digits is outside the 64-bit range (|n| < 2**63)")


def _axis_length(matrix: dict[str, Any], key: str) -> int:
    axis = matrix.get(key)
    return len(axis) if isinstance(axis, list) and axis else 1


def matrix_size(matrix: dict[str, Any], repeats: int | None = None, engines: int | None = None,
                precisions: int | None = None, devices_given: bool = False) -> int:
    """Runs the matrix expands to: the product of its axes' lengths and the repeats (no expansion)."""
    count = engines if engines is not None else _axis_length(matrix, "engines")
    count *= precisions if precisions is not None else _axis_length(matrix, "precisions")
    count *= _axis_length(matrix, "paths") * _axis_length(matrix, "batch_sizes")
    count *= 1 if devices_given else _axis_length(matrix, "devices")
    given = repeats if repeats is not None else matrix.get("repeats")
    return count * (given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else 1)


def check_matrix_size(matrix: dict[str, Any], origin: str, **axes: Any) -> int:
    """The matrix's run count; BadInput past MAX_RUNS, naming the axes."""
    runs = matrix_size(matrix, **axes)
    if runs > MAX_RUNS:
        lengths = {key: _axis_length(matrix, key) for key in ("engines", "precisions", "paths", "batch_sizes", "devices")}
        shown = " x ".join(f"{n} {key}" for key, n in lengths.items() if n > 1) or "1 cell"
        repeats = axes.get("repeats") or matrix.get("repeats") or 1
        raise BadInput(f"{origin}: matrix: {runs} runs ({shown} x {repeats} repeats), more than the {MAX_RUNS} "
                       "one scenario may expand to")
    return runs
