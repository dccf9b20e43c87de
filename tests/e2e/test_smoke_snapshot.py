"""End to end: the smoke's artifact is the same as before the refactoring of issue 24, ignoring times, ids and
measured numbers (the golden snapshot, tests/fixtures/smoke_snapshot/; how it is made and refreshed: tests/artifact_snapshot.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.artifact_snapshot import GOLDEN, compare, run_smoke, snapshot

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def current(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict:
    folder, summary = run_smoke(tmp_path_factory.mktemp("snapshot"), dict(os.environ))
    return snapshot(folder, summary)


def test_the_smoke_artifact_is_the_same_as_the_golden(current):
    golden = json.loads(GOLDEN.read_text())
    diffs = compare(golden, current)
    assert not diffs, ("the smoke artifact differs from the golden snapshot (if meant: python3 -m tests.artifact_snapshot "
                       "--refresh, and say why in the commit):\n" + "\n".join(diffs[:60]))
