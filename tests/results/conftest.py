"""Fixtures of the results tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.results.helpers import build_artifact


@pytest.fixture()
def make_artifact(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1000))

    def build(throughputs: dict[tuple[str, str], list[float | None]], **kwargs: Any) -> Path:
        kwargs.setdefault("artifact_id", f"20260101T00000{next(counter)}Z-abc123")
        return build_artifact(tmp_path / "results", throughputs, **kwargs)

    return build
