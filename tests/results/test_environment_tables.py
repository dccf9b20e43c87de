"""The report's Host and Engines tables: every host fact run.json records, one engine row per precision."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from orchestrator.reports.data import ReportData, load_report_data
from orchestrator.reports.tables import Table, all_tables

HOST = {"cpu_model": "AMD EPYC 9654", "cpu_affinity": "0-3", "cpu_affinity_count": 4, "governors": {"performance": "0-3"},
        "scaling_driver": "acpi-cpufreq", "boost": True, "boost_source": "cpufreq/boost", "load_avg": [0.5, 0.25, 0.125],
        "cpu_flags": ["avx2", "avx512f", "fma"]}
RUNS = {("tensorflow", "fp32"): [10.0, 11.0, 12.0], ("tensorflow", "bf16"): [20.0, 21.0, 22.0], ("jax", "fp32"): [30.0, None]}


def engines(data: ReportData) -> Table:
    return next(t for t in all_tables(data) if t.key == "engines")


def host(data: ReportData) -> Table:
    return next(t for t in all_tables(data) if t.key == "host")


def facts(table: Table) -> dict[str, str]:
    return dict(table.rows)


def test_the_engines_table_has_one_row_per_engine_and_precision(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact(RUNS))
    table = engines(data)
    assert table.headers[:4] == ["engine", "precision", "path", "runs"]
    keys = [tuple(row[:4]) for row in table.rows]
    assert keys == [("tensorflow", "fp32", "optimized", "b32 x1 r1-3"), ("tensorflow", "bf16", "optimized", "b32 x1 r1-3"),
                    ("jax", "fp32", "optimized", "b32 x1 r1")]  # the failed run reported no environment
    assert len({tuple(row) for row in table.rows}) == len(table.rows)


def test_runs_of_one_engine_and_precision_with_another_environment_get_their_own_row(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact({("tensorflow", "fp32"): [10.0, 11.0, 12.0]}))
    run = data.runs[2]  # e.g. a run resumed with another image
    data.runs[2] = dataclasses.replace(run, result=dataclasses.replace(run.result, environment={**run.result.environment,
                                                                                                 "framework_version": "9.9"}))
    rows = engines(data).rows
    assert [(row[3], row[4]) for row in rows] == [("b32 x1 r1-2", rows[0][4]), ("b32 x1 r3", "PyTorch 9.9")], rows


def test_a_failed_engine_result_without_work_gets_its_own_row(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact({("jax", "bf16"): [10.0, 11.0]}))
    run = data.runs[1]
    data.runs[1] = dataclasses.replace(run, record=dataclasses.replace(run.record, status="failed", throughput=None),
                                       result=dataclasses.replace(run.result, status="failed", work=None, measurements=None))
    rows = engines(data).rows
    assert [(row[3], row[-1]) for row in rows] == [("b32 x1 r1", rows[0][-1]), ("b32 x1 r2", "-")] and rows[0][-1] != "-"


def test_the_host_table_lists_every_fact_run_json_records(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact(RUNS, host=HOST))
    data.runs[1] = dataclasses.replace(data.runs[1], record=dataclasses.replace(data.runs[1].record, host={
        **HOST, "load_avg": [2.0, 1.0, 0.5], "cpu_model": "Intel Xeon", "memory_total_bytes": 2**35}))
    table = host(data)
    shown = facts(table)
    assert shown["hostname"] == "synthetic" and shown["cpus"] == "2"
    assert shown["CPU model"] == "AMD EPYC 9654 (7 runs); Intel Xeon (1 run)"
    assert shown["CPU affinity"] == "0-3 (4 CPUs)"
    assert shown["CPU frequency governor"] == "performance: 0-3"
    assert shown["CPU scaling driver"] == "acpi-cpufreq"
    assert shown["CPU boost / turbo"] == "on (cpufreq/boost)"
    assert shown["load average 1, 5, 15 min"] == "0.50-2.00, 0.25-1.00, 0.12-0.50 (lowest-highest before 8 runs)"
    assert shown["CPU flags"] == "avx2 avx512f fma"
    assert shown["memory_total_bytes"] == f"unknown (not readable on the host) (7 runs); {2**35} (1 run)"  # a key bench adds later
    assert "cpu_affinity_count" not in shown and "boost_source" not in shown  # read into affinity and boost
    assert "8 of 8 runs" in table.notes[0]


def test_the_host_table_without_host_facts(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact(RUNS, host={**HOST, "cpu_flags": None, "governors": None, "boost": None}))
    shown = facts(host(data))
    assert shown["CPU flags"] == shown["CPU frequency governor"] == shown["CPU boost / turbo"] == "unknown (not readable on the host)"
    without_flags = {k: v for k, v in HOST.items() if k != "cpu_flags"}
    assert "CPU flags" not in facts(host(load_report_data(make_artifact(RUNS, host=without_flags))))
    table = host(load_report_data(make_artifact(RUNS)))  # records written before bench read the host state
    assert "CPU model" not in facts(table) and "No run recorded its host state" in table.notes[0]
    assert facts(table)["GPUs"] == "none (synthetic)"
