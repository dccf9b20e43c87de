"""The parity checks on JSON documents (a spec.json and result.json as the engine tests hold them): each read as the
typed RunSpec / EngineResult the orchestrator's checks take, the mismatches given back as their documents."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench_engine.contract import EngineResult, ResultMeasurements, RunSpec
from orchestrator.judge import parity


def check_against_spec(spec: dict[str, Any], result: dict[str, Any], device_kind: str | None = None) -> list[dict[str, Any]]:
    """parity.check_against_spec of the documents; ``device_kind`` (when given) in place of the result's own."""
    typed = EngineResult.from_json(result)
    if device_kind is not None:
        typed = dataclasses.replace(typed, environment={**typed.environment, "device_kind": device_kind})
    return [m.to_json() for m in parity.check_against_spec(RunSpec.from_json(spec), typed)]


def check_block_losses(spec: dict[str, Any], measurements: dict[str, Any]) -> list[dict[str, Any]]:
    """parity.check_block_losses of a spec document and a (partial) measurements block."""
    typed = ResultMeasurements(setup_s=0.0, warmup_s=0.0, warmup_steps=0, steady={},
                               block_losses=tuple(measurements.get("block_losses") or ()))
    return [m.to_json() for m in parity.check_block_losses(RunSpec.from_json(spec), typed)]


def expected_blocks(spec: dict[str, Any]) -> int:
    return parity.expected_blocks(RunSpec.from_json(spec))


def expected_samples(spec: dict[str, Any]) -> int:
    return parity.expected_samples(RunSpec.from_json(spec))
