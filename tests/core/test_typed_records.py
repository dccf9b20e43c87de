"""The typed run record, verdicts and summary rows: each is checked when it is made (every check has a case that
fails it), and reads back from / writes the same JSON document."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator.judge.compare import GroupChange
from orchestrator.judge.environment_diff import Difference
from orchestrator.judge.record import Mismatch, ParityVerdict, RunRecord, describe_mismatches
from orchestrator.judge.stats import Interval, SampleSummary, Significance, compare_samples, sample_summary
from orchestrator.judge.summary_model import (
    ApparentGroup,
    CrossFinding,
    GroupRow,
    Ratio,
    RunRow,
    ScalingRow,
    Summary,
    TelemetryOverview,
)
from orchestrator.run.attempt import Judgement

RECORD = {"schema_version": 1, "run_id": "jax-fp32-optimized-b32-d1-r1", "engine": "jax", "precision": "fp32", "path": "optimized",
          "batch_per_device": 32, "devices": 1, "repeat": 1, "status": "ok", "reason": None, "exit_code": 0,
          "runtime": {"name": "local", "interpreter": "/usr/bin/python3"}, "started_at": "2026-01-01T00:00:00.000Z",
          "finished_at": "2026-01-01T00:00:10.000Z", "wall_s": 10.0,
          "parity": {"checked": True, "ok": True, "mismatches": []}, "throughput": 123.0, "apparent_throughput": None,
          "telemetry": {"gpu": {"available": False, "reason": "no NVML"}}, "host": {"cpu_count": 2}}
STATS = sample_summary([1.0, 2.0, 3.0])
RUN = {"run_id": "r", "engine": "jax", "precision": "fp32", "path": "optimized", "batch_per_device": 32, "devices": 1,
       "repeat": 1, "status": "ok", "throughput": 1.0}
GROUP = GroupRow("jax", "fp32", "optimized", 32, 1, n=3, throughput=STATS, n_total=3)


def test_a_run_record_reads_back_the_document_it_writes() -> None:
    record = RunRecord.from_json(RECORD)
    assert record.to_json() == RECORD
    assert record.group == ("jax", "fp32", "optimized", 32, 1) and record.cell == ("fp32", "optimized", 32, 1)
    lost = Mismatch("steps", 10, 5)
    invalid = record.invalidated("cross-engine parity: steps", [lost])
    assert (invalid.status, invalid.throughput, invalid.apparent_throughput) == ("invalid", None, 123.0)
    assert invalid.parity == ParityVerdict(True, False, (lost,)) and record.status == "ok"  # a new record; the old one unchanged
    assert describe_mismatches([lost] * 4) == "parity: " + "; ".join(["steps expected 10 got 5"] * 3) + " (+1 more)"


BAD_RECORDS: dict[str, dict[str, Any]] = {
    "status": {"status": "lost"},
    "runtime name": {"runtime": {"interpreter": "/usr/bin/python3"}},
    "batch": {"batch_per_device": 0},
    "devices": {"devices": 0},
    "repeat": {"repeat": 0},
    "wall time": {"wall_s": -1.0},
    "throughput of a failed run": {"status": "failed", "parity": {"checked": False, "ok": False, "mismatches": []}},
}


@pytest.mark.parametrize("change", BAD_RECORDS.values(), ids=BAD_RECORDS.keys())
def test_a_run_record_refuses_bad_input(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RunRecord.from_json({**RECORD, **change})


BAD: dict[str, Callable[[], object]] = {
    "mismatch without field": lambda: Mismatch("", 1, 2),
    "ok verdict with mismatches": lambda: ParityVerdict(True, True, (Mismatch("steps", 1, 2),)),
    "ok verdict never checked": lambda: ParityVerdict(False, True),
    "attempt ending skipped": lambda: Judgement("skipped", "no"),
    "attempt of unknown status": lambda: Judgement("lost", "no"),
    "ok attempt without result": lambda: Judgement("ok"),
    "interval of unknown kind": lambda: Interval("iqr", 1.0, 2.0),
    "interval upside down": lambda: Interval("range", 2.0, 1.0),
    "statistics of nothing": lambda: dataclasses.replace(STATS, n=0),
    "median outside the values": lambda: dataclasses.replace(STATS, median=9.0),
    "ci95 not a pair": lambda: dataclasses.replace(STATS, ci95=(1.0,)),
    "p-value without verdict": lambda: Significance(0.5, None),
    "run row of unknown status": lambda: RunRow.from_json({**RUN, "status": "lost"}),
    "throughput of an invalid row": lambda: RunRow.from_json({**RUN, "status": "invalid"}),
    "run row with batch 0": lambda: RunRow.from_json({**RUN, "batch_per_device": 0}),
    "apparent block without runs": lambda: ApparentGroup(0, STATS, ("381 of 780 updates",)),
    "apparent block without reasons": lambda: ApparentGroup(1, STATS, ()),
    "more valid runs than runs": lambda: dataclasses.replace(GROUP, n=4),
    "statistics of no valid run": lambda: dataclasses.replace(GROUP, n=0),
    "valid runs without statistics": lambda: dataclasses.replace(GROUP, throughput=None),
    "group on 0 devices": lambda: dataclasses.replace(GROUP, devices=0),
    "ratio of an engine to itself": lambda: Ratio("fp32", "optimized", 32, 1, "jax", "jax", 1.0),
    "ratio not positive": lambda: Ratio("fp32", "optimized", 32, 1, "jax", "torch", 0.0),
    "speedup without efficiency": lambda: ScalingRow("jax", "fp32", "optimized", 32, 2, 10.0, 1.9, None),
    "scaling row with batch 0": lambda: ScalingRow("jax", "fp32", "optimized", 0, 2, 10.0, None, None),
    "cross finding without mismatch": lambda: CrossFinding("r", "jax", ()),
    "more runs with energy than runs": lambda: TelemetryOverview(True, 1, 2),
    "counts not adding up": lambda: Summary("s", "a", False, (RunRow.from_json(RUN),), (), (), {"ok": 2}),
    "a run twice": lambda: Summary("s", "a", False, (RunRow.from_json(RUN),) * 2, (), (), {"ok": 2}),
    "comparison without valid runs": lambda: GroupChange(("jax",), 0, 3, 1, 3, "n/a", compare_samples([1.0], [2.0])),
    "valid runs without comparison": lambda: GroupChange(("jax",), 3, 3, 3, 3, "n/a"),
    "difference of equal values": lambda: Difference("artifact", "host.cpu_model", "x", "x"),
}


@pytest.mark.parametrize("make", BAD.values(), ids=BAD.keys())
def test_typed_objects_refuse_bad_input(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        make()


def test_summary_rows_read_back_the_documents_they_write() -> None:
    assert SampleSummary.from_json(STATS.to_json()) == STATS
    assert GroupRow.from_json(GROUP.to_json()) == GROUP
    row = RunRow.from_json(RUN)
    assert RunRow.from_json(row.to_json()) == row
    ratio = Ratio("fp32", "optimized", 32, 1, "jax", "torch", 1.5, (1.4, 1.6), "ci95", (1.3, 1.7), 0.01, True, None)
    assert Ratio.from_json(ratio.to_json()) == ratio
    summary = Summary("s", "a", False, (row,), (GROUP,), (ratio,), {"ok": 1}, host={}, reference_engine="torch", scaling=(),
                      cross_engine_parity=(CrossFinding("r", "jax", (Mismatch("steps", 1, 2, "torch (t)"),)),), numerical_parity=(),
                      telemetry=TelemetryOverview(False, 1, 0, ("not recorded",)))
    assert Summary.from_json(summary.to_json()) == summary and summary.bad_runs == 0
    assert summary.group("jax", "fp32", "optimized") == GROUP and summary.group("torch", "fp32", "optimized") is None
