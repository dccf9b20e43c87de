"""Bounds a scenario document must keep before anything is expanded: finite numbers, integers that fit
in 64 bits, and a run matrix of at most MAX_RUNS runs (its size computed arithmetically, never by
expanding it). The per-field maxima live in schemas/scenario.schema.json; this module holds the rules
that apply to every value and to the matrix as a whole."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.scenario.blocks import Matrix

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


def _axis_lengths(matrix: Matrix) -> dict[str, int]:
    """The length of every axis of the matrix (the batch sizes: 1 when the workload gives the one batch size)."""
    return {"engines": len(matrix.engines), "precisions": len(matrix.precisions), "paths": len(matrix.paths),
            "batch_sizes": len(matrix.batch_sizes) or 1, "devices": len(matrix.devices)}


def matrix_size(matrix: Matrix, repeats: int | None = None, engines: int | None = None,
                precisions: int | None = None, devices_given: bool = False) -> int:
    """Runs the matrix expands to: the product of its axes' lengths and the repeats (no expansion)."""
    lengths = _axis_lengths(matrix)
    count = engines if engines is not None else lengths["engines"]
    count *= precisions if precisions is not None else lengths["precisions"]
    count *= lengths["paths"] * lengths["batch_sizes"]
    count *= 1 if devices_given else lengths["devices"]
    return count * (repeats if repeats is not None and repeats > 0 else matrix.repeats)


def check_matrix_size(matrix: Matrix, origin: str, repeats: int | None = None, engines: int | None = None,
                      precisions: int | None = None, devices_given: bool = False) -> int:
    """The matrix's run count; BadInput past MAX_RUNS, naming the axes."""
    runs = matrix_size(matrix, repeats, engines, precisions, devices_given)
    if runs > MAX_RUNS:
        shown = " x ".join(f"{n} {key}" for key, n in _axis_lengths(matrix).items() if n > 1) or "1 cell"
        raise BadInput(f"{origin}: matrix: {runs} runs ({shown} x {repeats or matrix.repeats} repeats), more than the {MAX_RUNS} "
                       "one scenario may expand to")
    return runs
