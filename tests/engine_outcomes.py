"""Assertions on an engine run's outcome, shared by the engine tests."""

from __future__ import annotations

from typing import Any

from tests.parity_docs import check_against_spec


def expect_ok(run_engine: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``spec``; the result must be ok, exit 0, and do exactly the work of its spec."""
    code, result, log = run_engine(spec)  # run_engine validates the result against the schema
    assert result is not None, log
    assert result["status"] == "ok", result.get("failure", log)
    assert code == 0, log
    assert check_against_spec(spec, result, result["environment"]["device_kind"]) == []
    return result


def expect_failed(run_engine: Any, spec: dict[str, Any], kind: str) -> dict[str, Any]:
    """Run ``spec``; the result must say failed with ``kind`` and the exit code be 1."""
    code, result, log = run_engine(spec)
    assert result is not None, log
    assert result["status"] == "failed" and code == 1, log
    assert result["failure"]["kind"] == kind, result["failure"]
    return result


def expect_block_means(spec: dict[str, Any], measured: dict[str, Any]) -> None:
    """Each block loss is the mean of its block's per-step losses (runs of at most K steps record every step)."""
    from bench_engine.harness import timing_blocks
    from bench_engine.schedule import Schedule

    sizes = [len(block.steps) for block in timing_blocks(Schedule.from_json(spec), spec["parity"]["dataset"]["samples"],
                                                         spec["parity"]["devices"])]
    losses, ends = measured["losses"], [sum(sizes[: i + 1]) for i in range(len(sizes))]
    assert len(losses) == ends[-1] and len(measured["block_losses"]) == len(sizes), measured
    for index, (size, end) in enumerate(zip(sizes, ends, strict=True)):
        mean = sum(losses[end - size : end]) / size
        assert abs(measured["block_losses"][index] - mean) <= 1e-5 * max(1.0, abs(mean)), (index, measured)
