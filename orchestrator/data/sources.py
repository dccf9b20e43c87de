"""Non-synthetic dataset sources (real archives, folders). Filled in by the datasets work."""

from __future__ import annotations

from orchestrator.errors import BadInput


def prepare_from_source(name: str, source: str, split: str, samples: int | None):
    raise BadInput(f"workload.dataset.source: {source!r} is not supported yet for {name}; use 'synthetic'")
