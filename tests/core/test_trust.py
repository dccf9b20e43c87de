"""Trust warnings (orchestrator/judge/trust.py): each kind fires on the facts that call for it and stays quiet otherwise;
the summary carries them per run and per group, schema-valid, and the terminal lines name the groups."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.judge import trust
from orchestrator.judge.summary_model import GroupRow
from orchestrator.judge.trust import GroupFacts, RunFacts, group_warnings, run_warnings, warning_lines
from orchestrator.schemas import validate
from tests.typed_docs import record_of, result_of
from tests.typed_docs import summarize_docs as summarize

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = json.loads((REPO / "tests" / "results" / "fixtures" / "result-template.json").read_text())
QUIET_RUN = RunFacts("r", 1, step_times=(0.1,) * 10, timed_steps=600, steady_s=60.0, load_start=0.5, load_end=1.5, cpus=2)


def ids(warnings: list[trust.TrustWarning]) -> list[str]:
    return [w.id for w in warnings]


def test_a_quiet_run_draws_no_warning() -> None:
    assert run_warnings(QUIET_RUN) == []
    assert group_warnings(GroupFacts((100.0, 101.0, 100.5)), [(1, []), (2, []), (3, [])]) == []


@pytest.mark.parametrize("times", [(0.1, 0.1, 0.4, 0.1, 0.1), (0.1, 0.1, 0.1, 0.04, 0.1)])  # a window 4x slower; one 2.5x faster
def test_outliers_fire(times: tuple[float, ...]) -> None:
    (warning,) = run_warnings(RunFacts(**{**QUIET_RUN.__dict__, "step_times": times}))
    assert warning.id == "outliers" and warning.message.startswith("step-time outliers: 1 of 5 windows")
    assert ("4.0x slower" if max(times) > 0.2 else "2.5x faster") in warning.message


@pytest.mark.parametrize("times", [(0.1, 0.12, 0.19, 0.09, 0.1), (0.1, 1.0)])  # under 2x off the median; too few windows
def test_outliers_stay_quiet(times: tuple[float, ...]) -> None:
    assert run_warnings(RunFacts(**{**QUIET_RUN.__dict__, "step_times": times})) == []


def test_outliers_from_the_engine_windows() -> None:
    """Windows of unequal length compare by time per step: 10 steps in 1 s is as fast as 5 in 0.5 s."""
    result = {"measurements": {"windows": [[10, 320, 1.0], [5, 160, 0.5], [10, 320, 1.05], [10, 320, 4.2], [0, 0, 0.0]]}}
    facts = RunFacts.of(record_of({"run_id": "r", "engine": "e", "precision": "fp32", "repeat": 1}), result_of(result))
    assert facts.step_times == pytest.approx((0.1, 0.1, 0.105, 0.42))
    assert ids(run_warnings(facts)) == ["outliers"]


@pytest.mark.parametrize(("start", "end", "when"), [(3.5, 1.0, "start"), (0.2, 2.5, "end"), (4.0, 3.0, "start and end")])
def test_host_load_fires(start: float, end: float, when: str) -> None:
    (warning,) = run_warnings(RunFacts(**{**QUIET_RUN.__dict__, "load_start": start, "load_end": end}))
    assert warning.id == "host_load" and warning.message == f"host busy: load {max(start, end):.2f} on 2 CPUs at the {when}"


@pytest.mark.parametrize(("start", "end", "cpus"), [(2.0, 2.0, 2), (7.9, 0.1, 8), (None, None, 2), (9.0, 9.0, None)])
def test_host_load_stays_quiet(start: float | None, end: float | None, cpus: int | None) -> None:
    """At most one runnable task per CPU, or nothing known to compare."""
    assert run_warnings(RunFacts(**{**QUIET_RUN.__dict__, "load_start": start, "load_end": end, "cpus": cpus})) == []


def test_host_load_reads_the_run_record() -> None:
    record = {"run_id": "r", "engine": "e", "precision": "fp32", "repeat": 1,
              "host": {"load_avg": [5.0, 1.0, 1.0], "load_avg_end": [0.5, 1.0, 1.0], "cpu_count": 4}}
    assert ids(run_warnings(RunFacts.of(record_of(record), result_of({})))) == ["host_load"]
    del record["host"]["cpu_count"]  # a record made before cpu_count: the artifact host's count
    assert ids(run_warnings(RunFacts.of(record_of(record), result_of({}), host_cpus=8))) == []
    assert ids(run_warnings(RunFacts.of(record_of(record), result_of({}), host_cpus=2))) == ["host_load"]


@pytest.mark.parametrize(("steps", "seconds"), [(4, 8.0), (748, 0.4)])  # a smoke run; a fast GPU's 0.4 s
def test_short_steady_state_fires(steps: int, seconds: float) -> None:
    (warning,) = run_warnings(RunFacts(**{**QUIET_RUN.__dict__, "timed_steps": steps, "steady_s": seconds}))
    assert warning.id == "short_steady_state" and warning.message.startswith(f"short steady state: {steps} timed steps in {seconds:.2f} s")


@pytest.mark.parametrize(("steps", "seconds"), [(50, 1.0), (748, 2.0), (None, None)])
def test_short_steady_state_stays_quiet(steps: int | None, seconds: float | None) -> None:
    assert run_warnings(RunFacts(**{**QUIET_RUN.__dict__, "timed_steps": steps, "steady_s": seconds})) == []


def test_single_repeat() -> None:
    assert [w.message for w in group_warnings(GroupFacts((100.0,)))] == ["1 repeat: no spread; use --repeats 3+"]
    assert group_warnings(GroupFacts((100.0, 100.0))) == [] and group_warnings(GroupFacts(())) == []


def test_high_spread() -> None:
    (warning,) = group_warnings(GroupFacts((100.0, 150.0, 80.0, 120.0)))
    assert warning.id == "high_spread" and warning.message == "high spread: 29.5% of the median across 4 repeats"
    assert group_warnings(GroupFacts((100.0, 104.0, 101.0))) == []  # 4% range


def test_a_group_names_the_repeats_a_run_warning_came_from() -> None:
    outlier = run_warnings(RunFacts(**{**QUIET_RUN.__dict__, "step_times": (0.1, 0.1, 0.5)}))
    one = group_warnings(GroupFacts((100.0, 100.0, 100.0)), [(1, []), (2, outlier), (3, [])])
    assert [w.message for w in one] == [outlier[0].message + " (repeat 2)"]
    two = group_warnings(GroupFacts((100.0, 100.0, 100.0)), [(1, outlier), (2, []), (3, outlier)])
    assert two[0].message.endswith("(repeats 1, 3; figures of 1)")
    alone = group_warnings(GroupFacts((100.0,)), [(1, outlier)])  # a group of one run: no repeat to name
    assert [w.message for w in alone] == ["1 repeat: no spread; use --repeats 3+", outlier[0].message]


def test_the_registry_and_the_schema_list_the_same_kinds() -> None:
    schema = json.loads((REPO / "schemas" / "summary.schema.json").read_text())
    group_ids = schema["properties"]["groups"]["items"]["properties"]["warning_ids"]["items"]["enum"]
    run_ids = schema["properties"]["runs"]["items"]["properties"]["warnings"]["items"]["properties"]["id"]["enum"]
    assert group_ids == list(trust.KINDS) and run_ids == [kind.id for kind in trust.RUN_KINDS]
    for kind in trust.KINDS.values():
        assert kind.when and kind.message and kind.scope in ("run", "group")


def _run(repeat: int, throughput: float, windows: list[list[float]] | None = None, load: float = 0.2,
         steps: int = 600, seconds: float = 30.0) -> tuple[dict[str, Any], dict[str, Any]]:
    run_id = f"fake-fp32-optimized-b32-d1-r{repeat}"
    record = {"schema_version": 1, "run_id": run_id, "engine": "fake", "precision": "fp32", "path": "optimized", "batch_per_device": 32,
              "devices": 1, "repeat": repeat, "status": "ok", "reason": None, "exit_code": 0, "runtime": {"name": "local"},
              "started_at": "t", "finished_at": "t", "wall_s": 40.0, "parity": {"checked": True, "ok": True, "mismatches": []},
              "throughput": throughput, "host": {"load_avg": [load, 0.1, 0.1], "load_avg_end": [0.1, 0.1, 0.1], "cpu_count": 2}}
    result = copy.deepcopy(TEMPLATE)
    result["run_id"] = run_id
    result["measurements"]["steady"].update(steps=steps, time_s=seconds, throughput=throughput)
    result["measurements"]["windows"] = windows or [[60, 1920, seconds / 10]] * 10
    return record, result


def test_the_summary_carries_the_warnings_per_run_and_per_group() -> None:
    runs = [_run(1, 100.0), _run(2, 101.0, windows=[[60, 1920, 3.0]] * 9 + [[60, 1920, 12.0]]), _run(3, 100.5, load=6.0)]
    summary = summarize("s", "20260101T000000Z-abc123", False, runs, {"cpu_count": 2})
    validate(summary, "summary")
    assert [ids_of(row) for row in summary["runs"]] == [[], ["outliers"], ["host_load"]]
    (group,) = summary["groups"]
    assert group["warning_ids"] == ["outliers", "host_load"]
    assert group["warnings"] == ["step-time outliers: 1 of 10 windows 2x+ off the median (worst 4.0x slower) (repeat 2)",
                                 "host busy: load 6.00 on 2 CPUs at the start (repeat 3)"]
    quiet = summarize("s", "20260101T000000Z-abc123", False, [_run(1, 100.0), _run(2, 101.0), _run(3, 100.5)], {"cpu_count": 2})
    assert quiet["groups"][0]["warnings"] == [] and all(row["warnings"] == [] for row in quiet["runs"])


def ids_of(row: dict[str, Any]) -> list[str]:
    return [w["id"] for w in row["warnings"]]


def test_an_invalid_run_is_not_a_groups_warning() -> None:
    record, result = _run(2, 100.0, steps=4, seconds=0.2)
    record.update(status="invalid", throughput=None, apparent_throughput=100.0)
    summary = summarize("s", "20260101T000000Z-abc123", False, [_run(1, 100.0), (record, result), _run(3, 100.0)], {"cpu_count": 2})
    assert ids_of(summary["runs"][1]) == ["short_steady_state"] and summary["groups"][0]["warning_ids"] == []


def test_warning_lines_name_the_groups() -> None:
    def group(engine: str, warnings: list[str]) -> GroupRow:
        return GroupRow.from_json({"engine": engine, "precision": "fp32", "path": "optimized", "batch_per_device": 32, "devices": 1,
                                   "n": 0, "throughput": None, "warnings": warnings})

    single = "1 repeat: no spread; use --repeats 3+"
    lines = warning_lines([group("jax", [single, "high spread: 9.0% of the median across 3 repeats"]), group("torch", [single])])
    assert lines == [f"jax fp32 optimized b32 x1, torch fp32 optimized b32 x1: {single}",
                     "jax fp32 optimized b32 x1: high spread: 9.0% of the median across 3 repeats"]
    assert warning_lines([group(f"e{i}", [single]) for i in range(5)]) == [f"5 groups: {single}"]
    assert warning_lines([group("jax", [])]) == []


def test_the_readme_lists_every_kind() -> None:
    readme = (REPO / "README.md").read_text()
    assert trust.markdown_table() in readme, "README's warnings table differs: python3 -m orchestrator.judge.trust"


def _on_node(repeat: int, throughput: float, node_type: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    record, result = _run(repeat, throughput)
    record["runtime"] = {"name": "slurm", "job_id": str(100 + repeat), "node": f"n{repeat}",
                         **({"node_type": node_type} if node_type else {})}
    return record, result


def test_mixed_node_types_are_flagged() -> None:
    """The repeats of one cell on nodes of different kinds (Slurm GRES/features/partitions): the group says so,
    in summary.json and in the terminal's warning lines."""
    runs = [_on_node(1, 100.0, "gres=gpu:h100:8 partitions=gpu"), _on_node(2, 100.5, "gres=gpu:a100:8 partitions=gpu"),
            _on_node(3, 100.2, "gres=gpu:h100:8 partitions=gpu")]
    summary = summarize("s", "20260101T000000Z-abc123", False, runs, {"cpu_count": 2})
    validate(summary, "summary")
    (group,) = summary["groups"]
    assert group["warning_ids"] == ["mixed_nodes"]
    message = "mixed node types: the repeats ran on 2 kinds of node (gres=gpu:a100:8 partitions=gpu | gres=gpu:h100:8 partitions=gpu)"
    assert group["warnings"] == [message]
    assert warning_lines([GroupRow.from_json(group)]) == [f"fake fp32 optimized b32 x1: {message}"]
    from orchestrator.judge.summary_model import Summary
    from orchestrator.reports.data import ReportData
    from orchestrator.reports.tables import groups

    table = groups(ReportData("a", Summary.from_json(summary), {}, []))  # the report's groups table
    assert message in table.cells[0][-1]


@pytest.mark.parametrize("kinds", [("gres=gpu:h100:8",) * 3, (None, None, None), ("gres=gpu:h100:8", None, "gres=gpu:h100:8")])
def test_one_node_type_is_not_flagged(kinds: tuple[str | None, ...]) -> None:
    runs = [_on_node(repeat, 100.0 + repeat / 10, kind) for repeat, kind in enumerate(kinds, 1)]
    summary = summarize("s", "20260101T000000Z-abc123", False, runs, {"cpu_count": 2})
    assert summary["groups"][0]["warning_ids"] == []
