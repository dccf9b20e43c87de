"""``bench results compare`` on two synthetic artifacts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.compare import compare_summaries
from orchestrator.jsonio import read_json
from tests.results.helpers import run_cli

A = {("pytorch", "bf16"): [100.0, 101.0, 99.0, 100.5], ("pytorch", "fp32"): [50.0, 51.0, 49.0, 50.5],
     ("jax", "bf16"): [120.0], ("tensorflow", "bf16"): [80.0, 81.0, 79.0, 80.5]}
B = {("pytorch", "bf16"): [150.0, 151.0, 149.0, 150.5], ("pytorch", "fp32"): [50.2, 49.1, 50.9, 49.8],
     ("jax", "bf16"): [130.0, 131.0], ("tensorflow", "bf16"): [None, None], ("tensorflow", "fp32"): [10.0]}


@pytest.fixture()
def pair(make_artifact: Callable[..., Path]) -> tuple[Path, Path]:
    return make_artifact(A), make_artifact(B)


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
    assert same["significant"] is False and same["verdict"].startswith("no significant difference")
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
