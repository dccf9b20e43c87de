"""Fixtures of the orchestrator tests: fake engines on the engine path, an isolated dataset cache."""

from __future__ import annotations

import pytest

from tests.core.cli_helpers import use_fake_engines


@pytest.fixture()
def fake_engines(monkeypatch: pytest.MonkeyPatch, data_dir):
    use_fake_engines(monkeypatch)
    yield
    from orchestrator.engines.registry import discover

    monkeypatch.delenv("BENCH_ENGINE_PATH", raising=False)
    discover.cache_clear()
