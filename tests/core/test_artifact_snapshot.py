"""The smoke snapshot's comparison (tests/artifact_snapshot.py): strict on keys, types and stable values,
tolerant of measured numbers, times and ids."""

from __future__ import annotations

import copy
import json

import pytest

from tests.artifact_snapshot import GOLDEN, Unexpected, compare, document

RESULT = "runs/pytorch-fp32-optimized-b32-d1-r1/result.json"


@pytest.fixture()
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_the_golden_compares_equal_to_itself(golden):
    assert compare(golden, copy.deepcopy(golden)) == []


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d[RESULT]["work"].pop("steps"), "key 'steps' is gone"),
    (lambda d: d[RESULT]["work"].update(steps_run=6), "key 'steps_run' is new"),
    (lambda d: d[RESULT]["work"].update(steps=6.0), "work.steps: float 6.0, was int 6"),
    (lambda d: d[RESULT]["work"].update(steps=7), "work.steps: 7, was 6"),
    (lambda d: d[RESULT]["work"]["optimizer"].update(lr="0.1"), "work.optimizer.lr: str"),
    (lambda d: d[RESULT]["measurements"].update(setup_s=None), "measurements.setup_s: NoneType null, was str \"<float>\""),
    (lambda d: d[RESULT]["measurements"]["losses"].pop(), "measurements.losses: 5 items, was 6"),
    (lambda d: d["summary.json"]["runs"][0].update(status="failed"), "runs.0.status: \"failed\", was \"ok\""),
    (lambda d: d["manifest.json"]["files"][0].update(sha256="0" * 64), "files.0.sha256"),
])
def test_a_changed_key_type_or_stable_value_fails(golden, mutate, expected):
    changed = copy.deepcopy(golden)
    mutate(changed["documents"])
    diffs = compare(golden, changed)
    assert len(diffs) == 1 and expected in diffs[0], diffs


def test_a_file_added_or_gone_fails(golden):
    changed = copy.deepcopy(golden)
    changed["files"].append("runs/pytorch-fp32-optimized-b32-d1-r1/extra.json")
    diffs = compare(golden, changed)
    assert len(diffs) == 1 and diffs[0].startswith(f"files: {len(golden['files']) + 1} items, was {len(golden['files'])} "), diffs
    changed["files"] = [*golden["files"][:-1], "summary2.json"]
    assert any("summary2.json" in d for d in compare(golden, changed))


def run_record(throughput: float, started: str, load: list[float], interpreter: str = "/usr/bin/python3") -> dict:
    return {"run_id": "x", "status": "ok", "started_at": started, "finished_at": started, "wall_s": 1.5 * throughput,
            "throughput": throughput, "apparent_throughput": None, "runtime": {"name": "local", "interpreter": interpreter},
            "host": {"cpu_count": len(load), "load_avg": load}}


def test_measured_numbers_times_and_host_facts_are_ignored():
    one = document("runs/x/run.json", run_record(17.8, "2026-12-01T19:17:01.988Z", [0.5, 1.0]))
    two = document("runs/x/run.json", run_record(11.2, "2027-01-02T03:04:05.678Z", [3.0, 2.0, 1.0], "/venv/bin/python"))
    assert compare(one, two) == []
    assert one["throughput"] == "<float>" and one["apparent_throughput"] is None and one["host"] == {"cpu_count": "<host>", "load_avg": "<host>"}


def test_a_time_in_another_format_fails():
    with pytest.raises(Unexpected, match="started_at"):
        document("runs/x/run.json", run_record(1.0, "2026-12-01 19:17:01", [0.5]))


def test_load_dependent_warnings_are_dropped_and_numbers_in_messages_masked():
    def summary(warnings: list[tuple[str, str]]) -> dict:
        return {"runs": [{"throughput": 2.0, "warnings": [{"id": i, "message": m} for i, m in warnings]}],
                "groups": [{"warnings": [m for _, m in warnings], "warning_ids": [i for i, _ in warnings]}]}

    busy = summary([("host_load", "host busy: load 2.62 on 2 CPUs at the end"), ("short_steady_state", "short steady state: 4 timed steps in 7.20 s")])
    idle = summary([("short_steady_state", "short steady state: 4 timed steps in 1.15 s")])
    assert compare(document("summary.json", busy), document("summary.json", idle)) == []
    assert document("summary.json", idle)["groups"][0]["warnings"] == ["short steady state: # timed steps in # s"]
