"""Where bench's own files live: schemas/, scenarios/ and images/ of a checkout or an installed wheel."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def resource_dir(name: str) -> Path:
    """The folder ``name`` (schemas, scenarios, images): from the wheel's data, else the checkout."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"bench resource folder '{name}' not found next to {_PACKAGE}")


def schemas_dir() -> Path:
    return resource_dir("schemas")


def scenarios_dir() -> Path:
    return resource_dir("scenarios")


def images_dir() -> Path:
    return resource_dir("images")


def default_results_dir() -> Path:
    """results/ of the checkout when running from one, else ./results."""
    checkout = _PACKAGE.parent / "results"
    return checkout if checkout.is_dir() else Path.cwd() / "results"
