"""An engine's result is judged, never trusted: deep nesting, NaN/Infinity, out-of-range numbers, a
link, a FIFO or a folder in place of ``result.json`` make that run ``invalid`` (the matrix goes on),
and bench never writes a ``NaN`` token. Hostile files are written only under each test's tmp folder."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench_engine.contract import RunSpec
from bench_engine.result import write_json_atomic
from orchestrator.jsonio import write_json
from orchestrator.judge.result_read import REJECTED_RESULT
from orchestrator.run import attempt
from orchestrator.runtimes import Execution
from orchestrator.schemas import SchemaError, validate
from orchestrator.strictjson import MAX_DEPTH, StrictJsonError, check_numbers, loads_strict, nesting_depth
from tests.reliability.hostile_support import FAKE_SCENARIO, call, fake_engines

__all__ = ["fake_engines"]
EXITED = Execution("exited", 0)
_REAL: dict[str, Any] = {}
_EXAMPLES = int(os.environ.get("BENCH_FUZZ_EXAMPLES", "120"))
_RANDOM = os.environ.get("BENCH_FUZZ_RANDOM") == "1"


@pytest.fixture()
def real(tmp_path: Path, capsys, monkeypatch, fake_engines) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec, result) of one real ok run of the fake engine, made once per module."""
    if not _REAL:
        out = tmp_path / "real"
        code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(out),
                            "--engines", "fake", "--precisions", "fp32", "--json")
        assert code == 0, err
        (run,) = out.glob("fake_tiny/*/runs/*")
        _REAL.update(spec=json.loads((run / "spec.json").read_text()), result=json.loads((run / "result.json").read_text()))
    return copy.deepcopy(_REAL["spec"]), copy.deepcopy(_REAL["result"])


def judge(spec: dict[str, Any], execution: Execution, path: Path) -> tuple[str, str | None, Any, Any]:
    """attempt.judge of the spec document ``spec``: (status, reason, result, parity)."""
    verdict = attempt.judge(RunSpec.from_json(spec), execution, path)
    return verdict.status, verdict.reason, verdict.result, verdict.parity


def _judge_text(tmp_path: Path, spec: dict[str, Any], text: str | bytes) -> tuple[str, str | None, Path]:
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    (run / "result.json").write_bytes(text.encode() if isinstance(text, str) else text)
    status, reason, _, _ = judge(spec, EXITED, run / "result.json")
    return status, reason, run


def test_a_valid_result_is_ok(real, tmp_path: Path) -> None:
    spec, result = real
    status, reason, run = _judge_text(tmp_path, spec, json.dumps(result))
    assert (status, reason) == ("ok", None) and (run / "result.json").is_file()


@pytest.mark.parametrize(("edit", "why"), [
    (lambda text: "[" * 200_000 + "]" * 200_000, "nested more than"),
    (lambda text: text.replace('"throughput": ', '"throughput": NaN, "x": ', 1), "NaN is not a JSON number"),
    (lambda text: text.replace('"throughput": ', '"throughput": Infinity, "x": ', 1), "Infinity is not a JSON number"),
    (lambda text: text.replace('"throughput": ', '"throughput": 1e400, "x": ', 1), "not finite"),
    (lambda text: text.replace('"throughput": ', '"throughput": ' + "9" * 400 + ', "x": ', 1), "out of range"),
    (lambda text: text.replace('"throughput": ', '"throughput": -5.0, "x": ', 1), "schema"),
    (lambda text: "\xff" + text, "not JSON"),
])
def test_hostile_result_text_makes_the_run_invalid(real, tmp_path: Path, edit, why: str) -> None:
    spec, result = real
    status, reason, run = _judge_text(tmp_path, spec, edit(json.dumps(result, indent=1)))
    assert status == "invalid" and why in reason and REJECTED_RESULT in reason, reason
    assert (run / REJECTED_RESULT).is_file() and not (run / "result.json").exists()


def test_an_oversized_result_is_refused_unparsed(real, tmp_path: Path, monkeypatch) -> None:
    spec, result = real
    text = json.dumps(result)
    monkeypatch.setattr("orchestrator.judge.result_read.MAX_RESULT_BYTES", len(text) - 1)
    assert "larger than" in _judge_text(tmp_path, spec, text)[1]
    monkeypatch.setattr("orchestrator.judge.result_read.MAX_RESULT_BYTES", len(text))
    assert _judge_text(tmp_path, spec, text)[0] == "ok"


def test_a_linked_result_is_removed_never_followed(real, tmp_path: Path) -> None:
    spec, result = real
    target = tmp_path / "planted.json"  # a file of this test, standing for a system file
    target.write_text(json.dumps(result))
    run = tmp_path / "run"
    run.mkdir()
    (run / "result.json").symlink_to(target)
    status, reason, _, _ = judge(spec, EXITED, run / "result.json")
    assert status == "invalid" and "symbolic link" in reason and "never followed" in reason
    assert os.listdir(run) == [] and json.loads(target.read_text()) == result  # no copy kept, the target untouched


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_special_result_is_removed(real, tmp_path: Path, kind: str) -> None:
    spec, _ = real
    run = tmp_path / "run"
    run.mkdir()
    if kind == "fifo":
        os.mkfifo(run / "result.json")
    else:
        (run / "result.json").mkdir()
        (run / "result.json" / "x").write_text("x")
    status, reason, _, _ = judge(spec, EXITED, run / "result.json")
    assert status == "invalid" and ("FIFO" if kind == "fifo" else "folder") in reason
    assert os.listdir(run) == []


def test_a_failure_while_judging_fails_only_that_run(real, tmp_path: Path, monkeypatch) -> None:
    spec, result = real

    def broken(*_: Any) -> list:
        raise KeyError("surprise")

    monkeypatch.setattr(attempt, "check_against_spec", broken)
    status, reason, _ = _judge_text(tmp_path, spec, json.dumps(result))
    assert status == "invalid" and "could not be judged: KeyError" in reason


def test_the_strict_parser_bounds() -> None:
    assert nesting_depth(b'{"a": "[[[[[[", "b": [[1]]}') == 3  # brackets in strings do not count
    assert loads_strict(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None  # one step inside
    with pytest.raises(StrictJsonError, match="nested"):
        loads_strict(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))  # one step past
    check_numbers({"a": [2**63 - 1, -(2**63 - 1), 1.5e18, None, True, "NaN"]})
    for bad in (2**63, -(2**63), float("nan"), float("inf")):
        with pytest.raises(StrictJsonError):
            check_numbers({"a": [bad]})


def test_bench_never_writes_a_nan_token(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_json(tmp_path / "x.json", {"a": float("nan")})
    assert not (tmp_path / "x.json").exists()
    write_json(tmp_path / "x.json", {"a": 1.5})
    write_json_atomic(tmp_path / "r.json", {"loss": float("nan"), "losses": [1.0, float("inf")], "ok": 2.0})
    assert json.loads((tmp_path / "r.json").read_text(), parse_constant=pytest.fail) == {"loss": None, "losses": [1.0, None], "ok": 2.0}


def test_the_matrix_goes_on_after_a_hostile_result(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    out = tmp_path / "out"
    code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(out),
                        "--precisions", "fp32", "--set", "engines.fake.options.behaviour=deep_result", "--json")
    assert code == 1, err
    (artifact,) = out.glob("fake_tiny/*")
    runs = {p.name.split("-")[0]: json.loads((p / "run.json").read_text()) for p in artifact.glob("runs/*")}
    assert runs["fake"]["status"] == "invalid" and "nested more than" in runs["fake"]["reason"]
    assert runs["fake2"]["status"] == "ok"
    assert call(capsys, monkeypatch, "results", "validate", str(artifact))[0] == 0
    json.loads((artifact / "summary.json").read_text(), parse_constant=pytest.fail)


@pytest.mark.parametrize("behaviour", ["nan_result", "link_result", "fifo_result"])
def test_hostile_engines_end_in_an_invalid_run_and_a_valid_artifact(behaviour: str, tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    out = tmp_path / "out"
    code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(out),
                        "--engines", "fake", "--precisions", "fp32", "--set", f"engines.fake.options.behaviour={behaviour}", "--json")
    assert code == 1, err
    (run,) = out.glob("fake_tiny/*/runs/*")
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "invalid" and record["throughput"] is None, record
    assert all(os.path.isfile(p) and not os.path.islink(p) for p in run.iterdir())
    assert call(capsys, monkeypatch, "results", "validate", str(run.parent.parent))[0] == 0
    json.loads((run.parent.parent / "summary.json").read_text(), parse_constant=pytest.fail)


def test_a_run_folder_swapped_for_a_link_is_never_written_through(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    out = tmp_path / "out"
    code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(out),
                        "--engines", "fake", "--precisions", "fp32", "--set", "engines.fake.options.behaviour=link_run_folder", "--json")
    assert code == 1, err
    (run,) = out.glob("fake_tiny/*/runs/*")
    assert run.is_dir() and not run.is_symlink()
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "invalid" and "symbolic link" in record["reason"]
    (moved,) = tmp_path.glob("**/moved-*")
    assert not (moved / "run.json").exists()  # bench wrote nothing through the link
    assert call(capsys, monkeypatch, "results", "validate", str(run.parent.parent))[0] == 0


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def _paths(document: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            out += _paths(value, (*prefix, index))
    return out


@settings(max_examples=_EXAMPLES, derandomize=not _RANDOM, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_results_are_judged_never_crash(real, tmp_path: Path, data) -> None:
    """A valid result with 1-3 values replaced by random JSON (NaN, infinities, huge integers, any
    type), or wrapped deep: judged without raising; ``ok`` only when schema-valid and finite."""
    spec, result = real
    document: Any = copy.deepcopy(result)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(document)))
        value = data.draw(_json)
        if not path:
            document = value
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = value
    for _ in range(data.draw(st.sampled_from([0, 0, 0, 3, MAX_DEPTH + 5]))):
        document = [document]
    text = json.dumps(document)  # may hold NaN/Infinity tokens: what a hostile engine writes
    status, reason, run = _judge_text(tmp_path, spec, text)
    assert status in ("ok", "invalid", "failed"), (status, reason)
    if status == "ok":
        accepted = json.loads((run / "result.json").read_text(), parse_constant=pytest.fail)
        validate(accepted, "engine-result")
        check_numbers(accepted)
        assert all(math.isfinite(x) for x in _numbers(accepted))
    else:
        assert reason


def _numbers(document: Any) -> list[float]:
    if isinstance(document, dict):
        return [x for value in document.values() for x in _numbers(value)]
    if isinstance(document, list):
        return [x for value in document for x in _numbers(value)]
    return [document] if isinstance(document, int | float) and not isinstance(document, bool) else []


def test_the_schema_bounds_measurements(real) -> None:
    _, result = real
    validate(result, "engine-result")
    for field in ("throughput",):
        bad = copy.deepcopy(result)
        bad["measurements"]["steady"][field] = -1.0
        with pytest.raises(SchemaError):
            validate(bad, "engine-result")
