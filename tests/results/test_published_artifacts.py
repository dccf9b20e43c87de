"""Every artifact published under docs/results validates: its files are the manifest's, the shared weights it
omits are listed as omitted (``bench results publish``), nothing was copied in by hand without its manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.artifacts.archive import validate_path
from tests.conftest import REPO

PUBLISHED = sorted(m.parent for m in (REPO / "docs" / "results").rglob("manifest.json"))


def test_there_are_published_artifacts() -> None:
    assert len(PUBLISHED) >= 20  # the glob found the folder: the test below ran on something


@pytest.mark.parametrize("artifact", PUBLISHED, ids=lambda p: p.relative_to(REPO / "docs" / "results").as_posix())
def test_a_published_artifact_validates(artifact: Path) -> None:
    assert [str(p) for p in validate_path(artifact)] == []
