"""``bench results compare`` on two synthetic artifacts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.jsonio import read_json
from orchestrator.judge import compare
from orchestrator.judge.summary_model import Summary
from tests.results.helpers import run_cli

A = {("pytorch", "bf16"): [100.0, 101.0, 99.0, 100.5], ("pytorch", "fp32"): [50.0, 51.0, 49.0, 50.5],
     ("jax", "bf16"): [120.0], ("tensorflow", "bf16"): [80.0, 81.0, 79.0, 80.5]}
B = {("pytorch", "bf16"): [150.0, 151.0, 149.0, 150.5], ("pytorch", "fp32"): [50.2, 49.1, 50.9, 49.8],
     ("jax", "bf16"): [130.0, 131.0], ("tensorflow", "bf16"): [None, None], ("tensorflow", "fp32"): [10.0]}


@pytest.fixture()
def pair(make_artifact: Callable[..., Path]) -> tuple[Path, Path]:
    return make_artifact(A), make_artifact(B)


def compare_summaries(a: dict, b: dict, **kwargs) -> dict:
    """The comparison document (``--json``) of two summary.json documents."""
    return compare.compare_summaries(Summary.from_json(a), Summary.from_json(b), **kwargs).to_json()


def _by_group(doc: dict) -> dict[tuple[str, str], dict]:
    return {(g["engine"], g["precision"]): g for g in doc["groups"]}


def test_compare_document(pair: tuple[Path, Path]) -> None:
    a, b = (read_json(p / "summary.json") for p in pair)
    doc = compare_summaries(a, b)
    assert "B / median of A" in doc["direction"]
    groups = _by_group(doc)
    faster = groups[("pytorch", "bf16")]
    assert faster["ratio"] == pytest.approx(150.25 / 100.25)
    assert faster["ci95"] is None and faster["interval"] == "range"  # 4 repeats a side: a range, not a 95% CI
    assert faster["range"][0] <= faster["ratio"] <= faster["range"][1]
    assert faster["p_value"] == pytest.approx(2 / 70) and faster["significant"] is True
    assert faster["verdict"] == "B faster" and faster["change_pct"] == pytest.approx(49.875, rel=1e-3)
    same = groups[("pytorch", "fp32")]
    assert same["significant"] is False and same["verdict"] == "no change"  # -0.2%: below the default 2% minimum effect
    unthresholded = _by_group(compare_summaries(a, b, min_change_pct=0.0))[("pytorch", "fp32")]
    assert unthresholded["verdict"].startswith("no significant difference")
    few = groups[("jax", "bf16")]
    assert few["p_value"] is None and few["significant"] is None and few["verdict"].startswith("n/a")
    assert few["ci95"] is None and few["ratio"] == pytest.approx(130.5 / 120.0)
    failed = groups[("tensorflow", "bf16")]
    assert failed["n_b"] == 0 and failed["runs_b"] == 2 and failed["ratio"] is None and failed["verdict"] == "n/a: no valid run in B"
    assert [(g["engine"], g["precision"]) for g in doc["only_in_b"]] == [("tensorflow", "fp32")]
    assert doc["only_in_a"] == []


def test_compare_cli_table_and_json(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run_cli(["results", "compare", *pair], monkeypatch, capsys)
    assert code == 0, err
    assert "B/A" in out and "1.499x" in out and "B faster" in out and "above 1 means B is faster" in out
    assert "only in B: tensorflow fp32" in err
    code, out, _ = run_cli(["results", "compare", *pair, "--json"], monkeypatch, capsys)
    assert code == 0
    doc = json.loads(out)
    assert _by_group(doc)[("pytorch", "bf16")]["significant"] is True
    code, out, _ = run_cli(["results", "compare", pair[1], pair[0], "--json"], monkeypatch, capsys)
    assert _by_group(json.loads(out))[("pytorch", "bf16")]["verdict"] == "B slower"


def test_compare_bad_artifacts(pair: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture) -> None:
    a, b = pair
    code, _, err = run_cli(["results", "compare", a, tmp_path / "missing"], monkeypatch, capsys)
    assert code == 2 and "no such artifact" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(["results", "compare", tmp_path / "empty", b], monkeypatch, capsys)
    assert code == 2 and "invalid artifact" in err
    log = next((b / "runs").iterdir()) / "engine.log"
    log.write_text("tampered\n")
    code, _, err = run_cli(["results", "compare", a, b], monkeypatch, capsys)
    assert code == 2 and "sha256 differs" in err
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not an archive")
    code, _, err = run_cli(["results", "compare", a, junk], monkeypatch, capsys)
    assert code == 2 and "refused" in err


BASE = [100.0, 100.1, 100.2, 100.3, 100.4]
HOST = {"cpu_model": "AMD EPYC 9654", "cpu_affinity": "0-15", "cpu_affinity_count": 16, "governors": {"performance": "0-15"},
        "scaling_driver": "acpi-cpufreq", "boost": True, "boost_source": "cpufreq/boost", "load_avg": [0.1, 0.2, 0.3]}


def test_min_change_threshold(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    a = make_artifact({("pytorch", "bf16"): BASE, ("jax", "bf16"): BASE})
    b = make_artifact({("pytorch", "bf16"): [v * 1.01 for v in BASE], ("jax", "bf16"): [v * 1.05 for v in BASE]})
    doc = compare_summaries(read_json(a / "summary.json"), read_json(b / "summary.json"))
    assert doc["min_change_pct"] == 2.0
    one, five = _by_group(doc)[("pytorch", "bf16")], _by_group(doc)[("jax", "bf16")]
    assert one["significant"] is True  # 5 vs 5 repeats, every B above every A: significant, yet below 2%
    assert one["verdict"] == "no change" and one["below_min_change"] is True
    assert five["verdict"] == "B faster" and five["below_min_change"] is False
    # a lower threshold lets the significant 1% through; the other direction is slower
    assert _by_group(compare_summaries(read_json(a / "summary.json"), read_json(b / "summary.json"), min_change_pct=0.5))[
        ("pytorch", "bf16")]["verdict"] == "B faster"
    for option in ("2%", "2"):
        code, out, err = run_cli(["results", "compare", b, a, "--json", "--min-change", option], monkeypatch, capsys)
        assert code == 0, err
        doc = json.loads(out)
        assert doc["min_change_pct"] == 2.0
        assert [_by_group(doc)[(e, "bf16")]["verdict"] for e in ("pytorch", "jax")] == ["no change", "B slower"]
    code, out, _ = run_cli(["results", "compare", a, b, "--min-change", "10%"], monkeypatch, capsys)
    assert code == 0 and "B faster" not in out and "no change" in out and "|change| < 10%" in out
    code, _, err = run_cli(["results", "compare", a, b, "--min-change", "lots"], monkeypatch, capsys)
    assert code == 2 and "--min-change 'lots': not a percentage" in err and "Traceback" not in err


def test_environment_diff(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    a = make_artifact({("pytorch", "bf16"): BASE}, host=HOST)
    same = make_artifact({("pytorch", "bf16"): BASE}, host={**HOST, "load_avg": [3.0, 2.0, 1.0]})  # load is no environment fact
    b = make_artifact({("pytorch", "bf16"): BASE}, environment={"framework_version": "2.14.0+cpu"},
                      host={**HOST, "governors": {"powersave": "0-15"}, "boost": False})
    code, out, err = run_cli(["results", "compare", a, same, "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["environment"] == {"same": True, "engines": ["pytorch"], "differences": []}
    code, out, _ = run_cli(["results", "compare", a, same], monkeypatch, capsys)
    assert "same environment" in out
    code, out, _ = run_cli(["results", "compare", a, b, "--json"], monkeypatch, capsys)
    env = json.loads(out)["environment"]
    assert env["same"] is False
    assert {(d["scope"], d["key"]): (d["a"], d["b"]) for d in env["differences"]} == {
        ("pytorch", "environment.framework_version"): ("2.13.0+cpu", "2.14.0+cpu"),
        ("pytorch", "host.governors"): ("performance 0-15", "powersave 0-15"),
        ("pytorch", "host.boost"): ("on", "off"),
    }
    code, out, _ = run_cli(["results", "compare", a, b], monkeypatch, capsys)
    assert code == 0 and "environment.framework_version" in out and "2.14.0+cpu" in out and "same environment" not in out


def test_the_diff_names_the_optimizations_that_differ(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    """Two compile modes or engine options compared: the diff says which, from what the engine reported it did."""
    def compile_mode(mode: str) -> dict[str, dict[str, object]]:
        return {"compile": {"applied": True, "detail": f"auto: torch.compile(mode={mode!r})"}}

    a = make_artifact({("pytorch", "bf16"): BASE}, host=HOST, optimizations=compile_mode("default"))
    b = make_artifact({("pytorch", "bf16"): BASE}, host=HOST, optimizations={
        **compile_mode("max-autotune-no-cudagraphs"), "inductor_kernel_tuning": {"applied": True, "detail": "option: tuned"}})
    code, out, err = run_cli(["results", "compare", a, b, "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert {(d["scope"], d["key"]): (d["a"], d["b"]) for d in json.loads(out)["environment"]["differences"]} == {
        ("pytorch", "optimizations.compile"): ("on: auto: torch.compile(mode='default')",
                                               "on: auto: torch.compile(mode='max-autotune-no-cudagraphs')"),
        ("pytorch", "optimizations.inductor_kernel_tuning"): (None, "on: option: tuned"),
    }
    code, out, _ = run_cli(["results", "compare", a, b, "--wide"], monkeypatch, capsys)
    assert code == 0 and "optimizations.inductor_kernel_tuning" in out and "same environment" not in out
    same = make_artifact({("pytorch", "bf16"): BASE}, host=HOST, optimizations=compile_mode("default"))
    code, out, _ = run_cli(["results", "compare", a, same], monkeypatch, capsys)
    assert code == 0 and "same environment and optimizations" in out


def test_optimization_facts_tolerate_an_odd_work_block() -> None:
    from orchestrator.judge.environment_diff import run_facts

    def optimizations(result: dict[str, object]) -> dict[str, str | None]:
        return {k: v for k, v in run_facts({}, result).items() if k.startswith("optimizations.")}

    assert optimizations({"work": [1]}) == {} and optimizations({"work": {"optimizations": "none"}}) == {}
    assert optimizations({"work": {"optimizations": {"compile": {"applied": True}, "odd": {"applied": False, "detail": "why"}}}}) == {
        "optimizations.compile": "on", "optimizations.odd": "off: why"}
