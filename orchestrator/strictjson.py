"""Strict, bounded JSON parsing of documents bench did not write (an engine's ``result.json``).

Nesting is bounded before ``json.loads`` runs (a cheap scan of the brackets outside strings), so a
document 200,000 levels deep is refused instead of raising RecursionError; ``NaN``, ``Infinity`` and
``-Infinity`` are refused (``parse_constant``), and every number must be finite and within
``MAX_MAGNITUDE`` (``1e400`` parses to infinity, a 400-digit integer parses to a huge int).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64  # nesting levels of arrays and objects; engine results use fewer than 10
MAX_MAGNITUDE = 2**63  # every number: |x| below this (int64 range; no measurement comes near it)
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


class StrictJsonError(ValueError):
    """The document is not strict, bounded JSON (the message says why)."""


def nesting_depth(data: bytes, bound: int = MAX_DEPTH) -> int:
    """Deepest nesting of ``data`` (strings skipped), counting stops once past ``bound``."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b'""', data)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > bound:
                break
        else:
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise StrictJsonError(f"{name} is not a JSON number")


def check_numbers(document: Any) -> None:
    """StrictJsonError unless every number in ``document`` is finite and below ``MAX_MAGNITUDE``."""
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, float) and not math.isfinite(value):
            raise StrictJsonError("a number is not finite (too large to be a float)")
        elif isinstance(value, int | float) and abs(value) >= MAX_MAGNITUDE:
            raise StrictJsonError(f"a number is out of range (|x| >= 2**63, {len(str(int(value)))} digits)")


def loads_strict(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` (UTF-8 JSON) strictly: bounded depth, no NaN/Infinity, every number finite and in range."""
    depth = nesting_depth(data, max_depth)
    if depth > max_depth:
        raise StrictJsonError(f"nested more than {max_depth} levels deep")
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise StrictJsonError("not UTF-8") from None
    except StrictJsonError:
        raise
    except (ValueError, RecursionError) as exc:  # ValueError: bad JSON, or an integer past Python's digit limit
        raise StrictJsonError(f"not JSON ({str(exc)[:120]})") from None
    check_numbers(document)
    return document


def dumps_strict(document: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses NaN and Infinity (ValueError) instead of writing non-JSON tokens."""
    return json.dumps(document, allow_nan=False, **kwargs)
