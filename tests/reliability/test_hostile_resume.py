"""Resume never seals forged content: entries outside the layout, files added to a sealed run, a forged
``ok`` run in an interrupted run's folder, an engine that rewrites an earlier run, and two resumes at once."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.artifacts import Artifact, seal, write_manifest
from orchestrator.artifacts.layout import layout_problem
from orchestrator.jsonio import write_json
from tests.reliability.hostile_support import FAKE_SCENARIO, call, fake_artifact, fake_engines, ok_run, save_figures, timed
from tests.reliability.test_hostile_artifacts import declare_in_flight

__all__ = ["fake_engines"]
pytestmark = pytest.mark.usefixtures("fake_engines")


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


@pytest.fixture()
def artifact(tmp_path: Path, capsys, monkeypatch) -> Path:
    return fake_artifact(tmp_path, capsys, monkeypatch)


def _crashed_run(artifact: Path) -> Path:
    return next(artifact.glob("runs/fake2-fp32-*"))


OUTSIDE = {
    "empty dot-folder": lambda a: (a / ".cache").mkdir(),
    "empty dot-folder in a run": lambda a: (ok_run(a) / ".d").mkdir(),
    "runs/not-a-run": lambda a: (a / "runs" / "not-a-run").mkdir(),
    "unknown top-level folder": lambda a: (a / "extra").mkdir(),
    "attempt not numbered": lambda a: (a / "attempts" / "x" / "latest").mkdir(parents=True),
    "file in runs/": lambda a: (a / "runs" / "notes.txt").write_text("x"),
}


@pytest.mark.parametrize("case", sorted(OUTSIDE))
def test_entries_outside_the_layout_fail_validation_and_resume(case: str, artifact: Path, capsys, monkeypatch) -> None:
    assert call(capsys, monkeypatch, "results", "validate", str(artifact))[0] == 0  # quiet on what bench wrote
    OUTSIDE[case](artifact)
    with timed("resume: outside the layout"):
        code, out, _ = call(capsys, monkeypatch, "results", "validate", str(artifact), "--json")
    assert code == 1 and "outside the artifact's layout" in " ".join(json.loads(out)["problems"]), out
    code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local")
    assert code == 2 and "changed since bench wrote it" in err


def test_the_layout_accepts_what_bench_writes() -> None:
    for rel, kind in [("runs", "dir"), ("attempts", "dir"), ("maxbatch", "dir"), ("init", "dir"), ("summary.json", "file"),
                      ("runs/fake-fp32-optimized-b16-d1-r1", "dir"), ("attempts/fake-fp32-optimized-b16-d1-r1/2", "dir"),
                      ("runs/fake-fp32-optimized-b16-d1-r1/telemetry.csv", "file"), ("maxbatch/fake-fp32/search.json", "file")]:
        assert layout_problem(rel, kind) is None, rel
    assert layout_problem("summary.json", "dir") and layout_problem("runs", "file")


@pytest.mark.parametrize("name", ["telemetry.csv", ".hidden", "extra.json"])
def test_a_file_added_to_a_sealed_run_is_refused(name: str, artifact: Path, capsys, monkeypatch) -> None:
    (ok_run(artifact) / name).write_text("gpu,util\n0,100\n")
    with timed("resume: added files"):
        code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local")
    assert code == 2 and name in err and "--force" in err
    assert not (artifact / "integrity.json").exists()
    code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--force", "--json")
    assert code in (0, 1) and json.loads((artifact / "integrity.json").read_text())["overrides"][0]["problem_count"] >= 1


def test_a_forged_ok_run_in_an_interrupted_folder_is_not_adopted(artifact: Path, capsys, monkeypatch) -> None:
    """The folder in flight holds a copied ok run (record and result): resume runs it again, never keeps it."""
    crashed = _crashed_run(artifact)
    shutil.rmtree(crashed)
    shutil.copytree(ok_run(artifact), crashed)
    for name in ("run.json", "result.json", "spec.json"):  # the ok run's documents, renamed to the crashed run
        text = (crashed / name).read_text().replace("fake-fp32", "fake2-fp32").replace('"engine": "fake"', '"engine": "fake2"')
        (crashed / name).write_text(text)
    declare_in_flight(artifact, crashed.relative_to(artifact).as_posix())
    code, out, _ = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--dry-run", "--json")
    plan = {r["run_id"]: r for r in json.loads(out)["runs"]}
    assert code == 0 and plan[crashed.name]["action"] == "run" and "never sealed" in plan[crashed.name]["why"], plan
    assert plan[ok_run(artifact).name]["action"] == "keep"  # quiet: a sealed ok run is kept
    code, _, _ = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--json")
    record = json.loads((crashed / "run.json").read_text())
    assert record["status"] == "failed", record  # run again (its engine crashes)
    (attempt,) = (artifact / "attempts" / crashed.name).iterdir()  # the forgery kept as evidence, never as a record
    assert not list(attempt.glob("*.json")) and (attempt / "run.json.unsealed").is_file() and (attempt / "result.json.unsealed").is_file()
    assert call(capsys, monkeypatch, "results", "validate", str(artifact))[0] == 0


def test_an_engine_that_rewrites_an_earlier_run_is_caught(tmp_path: Path, capsys, monkeypatch) -> None:
    out = tmp_path / "out"
    code, _, _ = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(out),
                        "--precisions", "fp32", "--set", "engines.fake2.options.behaviour=tamper_earlier", "--json")
    (artifact,) = out.glob("fake_tiny/*")
    victim = json.loads((ok_run(artifact) / "run.json").read_text())
    culprit = json.loads((_crashed_run(artifact) / "run.json").read_text())
    assert code == 1 and victim["status"] == "invalid" and "result.json changed after the run was sealed" in victim["reason"], victim
    assert culprit["status"] == "invalid" and "changed while its engine ran" in culprit["reason"], culprit
    assert victim["throughput"] is None and victim["apparent_throughput"]
    code, report, _ = call(capsys, monkeypatch, "results", "validate", str(artifact), "--json")
    assert code == 1 and any("result.json: sha256 differs" in p for p in json.loads(report)["problems"])  # the seal kept
    summary = json.loads((artifact / "summary.json").read_text())
    assert summary["counts"].get("ok", 0) == 0 and summary["counts"]["invalid"] == 2


def test_the_seal_is_never_rehashed(tmp_path: Path) -> None:
    root = tmp_path / "a"
    (root / "runs" / "e-fp32-p-b1-d1-r1").mkdir(parents=True)
    artifact = Artifact(root, "s", "id")
    result = root / "runs" / "e-fp32-p-b1-d1-r1" / "result.json"
    write_manifest(artifact, complete=False, in_flight_folders=["runs/e-fp32-p-b1-d1-r1"])
    result.write_text('{"throughput": 1}')
    first = {f["path"]: f["sha256"] for f in write_manifest(artifact, complete=False)["files"]}  # the run ended: sealed
    stat = result.stat()
    result.write_text('{"throughput": 9}')  # same size, mtime set back: only the change time tells
    os.utime(result, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (root / "runs" / "e-fp32-p-b1-d1-r1" / "forged.csv").write_text("x")
    second = write_manifest(artifact, complete=False)
    listed = {f["path"]: f["sha256"] for f in second["files"]}
    assert listed["runs/e-fp32-p-b1-d1-r1/result.json"] == first["runs/e-fp32-p-b1-d1-r1/result.json"]
    assert "runs/e-fp32-p-b1-d1-r1/forged.csv" not in listed  # never adopted
    assert "changed after the run was sealed" in seal.state(root).tampered["runs/e-fp32-p-b1-d1-r1"]
    write_json(result, {"throughput": 2})  # what bench itself writes is sealed anew (quiet)
    assert {f["path"]: f["sha256"] for f in write_manifest(artifact, complete=False)["files"]}[
        "runs/e-fp32-p-b1-d1-r1/result.json"] != first["runs/e-fp32-p-b1-d1-r1/result.json"]


def test_a_second_resume_at_once_is_refused(artifact: Path, capsys, monkeypatch) -> None:
    fd = os.open(artifact, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a first resume holds while it runs
        with timed("resume: locked"):
            code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local")
        assert code == 2 and "another bench is resuming this artifact" in err
    finally:
        os.close(fd)  # as when the first one exits, however it ends
    code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--json")
    assert code in (0, 1) and "another bench" not in err, err
    assert call(capsys, monkeypatch, "results", "validate", str(artifact))[0] == 0
