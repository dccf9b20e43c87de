"""Claimed vs measured, three ways; an invalid run's apparent throughput kept visible, never ranked."""

from __future__ import annotations

import dataclasses
from typing import Any

from orchestrator.judge.summary import summarize, work_shortfall
from orchestrator.judge.summary_model import Ratio, Summary
from orchestrator.reports.claims import measured_ratio
from orchestrator.reports.data import ReportData
from orchestrator.reports.tables import claims, groups, runs
from orchestrator.scenario.blocks import Claims
from tests.typed_docs import record_of, result_of

SCENARIO = Claims.from_json({"source": "ref", "hardware": "RTX 4080", "ratios": [
    {"engine": "opennn", "vs": "pytorch", "precision": "tf32", "path": "optimized", "claimed": 1.9, "as_stated": "fp32: 1.90x"},
    {"engine": "opennn", "vs": "tensorflow", "precision": "bf16", "claimed": 1.91}]})


def _record(engine: str, repeat: int, status: str = "ok", throughput: float | None = None, apparent: float | None = None,
            mismatches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"run_id": f"{engine}-tf32-r{repeat}", "engine": engine, "precision": "tf32", "path": "optimized", "batch_per_device": 128,
            "devices": 1, "repeat": repeat, "status": status, "reason": "parity: steps expected 780 got 381" if mismatches else None,
            "throughput": throughput, "apparent_throughput": apparent,
            "parity": {"checked": True, "ok": not mismatches, "mismatches": mismatches or []}}


LOST = [{"field": "steps", "expected": 780, "actual": 381, "against": "spec"}]


def _summary(opennn_status: str, opennn: list[float], pytorch: list[float]) -> Summary:
    runs_in = []
    for i, value in enumerate(opennn, 1):
        if opennn_status == "ok":
            runs_in.append((_record("opennn", i, throughput=value), None))
        else:
            runs_in.append((_record("opennn", i, "invalid", apparent=value, mismatches=LOST), None))
    runs_in += [(_record("pytorch", i, throughput=value), None) for i, value in enumerate(pytorch, 1)]
    return summarize("opennn_seed", "a1", False, [(record_of(record), result) for record, result in runs_in])


def test_shortfall_names_the_counted_work_parity_found_missing() -> None:
    assert work_shortfall(record_of(_record("opennn", 1, "invalid", mismatches=LOST))) == "381 of 780 updates"
    other = [{"field": "precision", "expected": "tf32", "actual": "fp32"}]
    assert work_shortfall(record_of(_record("opennn", 1, "invalid", mismatches=other))) is None
    assert work_shortfall(record_of(_record("opennn", 1))) is None


def test_an_invalid_group_keeps_its_apparent_throughput_but_no_ratio() -> None:
    summary = _summary("invalid", [75000.0, 74000.0, 76000.0], [40000.0, 41000.0, 42000.0])
    doc = summary.to_json()
    opennn = next(g for g in doc["groups"] if g["engine"] == "opennn")
    assert opennn["n"] == 0 and opennn["throughput"] is None
    assert opennn["apparent"]["throughput"]["median"] == 75000.0 and opennn["apparent"]["reasons"] == ["381 of 780 updates"]
    assert doc["ratios"] == []  # never ranked
    data = ReportData("x", summary, {}, [], [], None)
    assert "apparent 75,000, invalid: 3 run(s), 381 of 780 updates" in [row[-2] for row in groups(data).rows]
    run_rows = runs(data).rows
    assert run_rows[0][8] == "-" and run_rows[0][9] == "apparent 75,000, invalid: 381 of 780 updates"


def test_measured_ratio_from_medians_with_the_range_under_five_repeats() -> None:
    summary = _summary("ok", [30000.0, 36000.0, 33000.0], [40000.0, 44000.0, 42000.0])
    found = measured_ratio(summary, "opennn", "pytorch", "tf32", "optimized")
    assert found is not None and found.valid and found.label == "valid"
    assert abs(found.ratio - 33000 / 42000) < 1e-12
    assert found.interval is not None and found.interval.kind == "range"
    assert abs(found.interval.low - 30000 / 44000) < 1e-12 and abs(found.interval.high - 36000 / 40000) < 1e-12
    assert measured_ratio(summary, "opennn", "tensorflow", "tf32", "optimized") is None  # no tensorflow runs
    assert measured_ratio(summary, "opennn", "pytorch", "bf16", "optimized") is None  # never another precision's


def test_the_summary_ci_is_inverted_when_the_summary_took_the_pair_the_other_way() -> None:
    summary = _summary("ok", [30000.0] * 5, [40000.0] * 5)
    summary = dataclasses.replace(summary, ratios=(Ratio.from_json({
        "engine": "pytorch", "baseline_engine": "opennn", "precision": "tf32", "path": "optimized", "devices": 1, "ratio": 4 / 3,
        "ci95": [1.25, 1.5]}),))
    found = measured_ratio(summary, "opennn", "pytorch", "tf32", "optimized")
    assert found is not None and found.interval is not None and found.interval.kind == "ci95"
    assert abs(found.interval.low - 1 / 1.5) < 1e-12 and abs(found.interval.high - 1 / 1.25) < 1e-12


def test_claims_table_three_ways() -> None:
    fair = _summary("ok", [36000.0, 37000.0, 38000.0], [47000.0, 48000.0, 49000.0])
    published = _summary("invalid", [74000.0, 75000.0, 76000.0], [7700.0, 7800.0, 7900.0])
    table = claims(ReportData("fair", dataclasses.replace(fair, artifact_id="F"), {}, [], [], SCENARIO,
                              as_published=ReportData("pub", dataclasses.replace(published, artifact_id="P"), {}, [], [], SCENARIO)))
    assert table is not None and table.key == "claims"
    row = table.rows[0]
    assert row[:4] == ["opennn / pytorch", "tf32", "optimized", "1.90x"]
    assert row[4] == f"{75000 / 7800:.2f}x" and row[6] == "apparent, invalid: opennn 381 of 780 updates"
    assert row[7] == f"{37000 / 48000:.2f}x" and row[9] == "valid" and row[10] == f"{37000 / 48000 / 1.9:.2f}"
    assert table.rows[1][4] == "-" and table.rows[1][7] == "-"  # no tensorflow, no bf16: never another cell's ratio
    assert any("artifact P" in note for note in table.notes)


def test_claims_without_an_as_published_artifact_say_how_to_get_one() -> None:
    fair = _summary("ok", [36000.0], [48000.0])
    table = claims(ReportData("fair", dataclasses.replace(fair, artifact_id="F"), {}, [], [], SCENARIO))
    assert table is not None and table.rows[0][4] == "-" and table.rows[0][6] == "-"
    assert any("--as-published" in note for note in table.notes)
    assert claims(ReportData("fair", dataclasses.replace(fair, artifact_id="F"), {}, [], [], None)) is None


def test_the_terminal_shows_an_invalid_runs_apparent_figure_in_its_samples_column() -> None:
    from orchestrator.reports import summary_tables

    summary = _summary("invalid", [75000.0], [40000.0])
    for wide, apparent, valid in ((True, "apparent 75,000, invalid: 381 of 780 updates", "40,000.0"), (False, "(75,000)", "40,000")):
        table = summary_tables.runs(summary, wide)
        column = table.headers.index("samples/s")
        assert table.rows[0][column] == apparent and table.rows[1][column] == valid


def test_the_lost_work_table_puts_an_invalid_runs_second_signals_beside_the_fair_run() -> None:
    from orchestrator.reports.claims import lost_work_table
    from orchestrator.reports.data import RunData

    def run(engine: str, status: str, means: list[float], moved: float) -> RunData:
        record = _record(engine, 1, status, throughput=40000.0 if status == "ok" else None,
                         apparent=70000.0 if status == "invalid" else None, mismatches=LOST if status == "invalid" else None)
        result = {"measurements": {"block_losses": means}, "work": {"weight_change": {"l2": 1.0, "relative": moved, "values": 4}}}
        return RunData(record["run_id"], record_of(record), result_of(result, record["run_id"]), None)

    fair_runs = [run("opennn", "ok", [2.5, 2.4, 2.3], 0.28)]
    published_runs = [run("opennn", "invalid", [1.4, 1.2, 1.1], 0.21)]
    fair = summarize("opennn_seed", "F", False, [(r.record, r.result) for r in fair_runs])
    published = summarize("as_published", "P", False, [(r.record, r.result) for r in published_runs])
    for row in published.runs:
        assert row.weight_change == 0.21
    table = lost_work_table(ReportData("f", fair, {}, fair_runs, [], SCENARIO), ReportData("p", published, {}, published_runs, [], None))
    assert table is not None
    (row,) = table.rows
    assert row[:6] == ["opennn", "tf32", "381 of 780 updates", "0.2100", "0.2800", "0.75"]
    assert row[6] == f"{(2.3 - 1.1) / 2.3:.1%}"
    honest = ReportData("p", fair, {}, fair_runs, [], {})
    assert lost_work_table(ReportData("f", fair, {}, fair_runs, [], SCENARIO), honest) is None  # no invalid run: no table
    assert lost_work_table(ReportData("f", fair, {}, fair_runs, [], SCENARIO), None) is None
