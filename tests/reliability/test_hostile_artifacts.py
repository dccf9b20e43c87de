"""Hostile artifacts: extra dot-files, links, FIFOs and tampered values are refused by validate, report,
show and resume (which checks the hashes before it writes anything); no link is ever followed."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.artifacts.manifest import file_sha256
from orchestrator.errors import BadInput
from orchestrator.reports.data import load_report_data
from tests.reliability.hostile_support import call, fake_artifact, fake_engines, ok_run, save_figures, timed

__all__ = ["fake_engines"]
pytestmark = pytest.mark.usefixtures("fake_engines")


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


@pytest.fixture()
def artifact(tmp_path: Path, capsys, monkeypatch) -> Path:
    return fake_artifact(tmp_path, capsys, monkeypatch)


HOSTILE = {
    "dot-file": lambda a, out: (a / ".payload.sh").write_text("#!/bin/sh\nrm -rf ~\n"),
    "dot-file-in-run": lambda a, out: (ok_run(a) / ".hidden").write_text("x"),
    "dot-folder": lambda a, out: ((a / ".git").mkdir(), (a / ".git" / "config").write_text("x")),
    "symlink-file": lambda a, out: (a / "extra.json").symlink_to("/etc/hostname"),
    "symlink-folder": lambda a, out: (a / "runs" / "evil-run").symlink_to(out, target_is_directory=True),
    "symlink-replaces-listed": lambda a, out: ((ok_run(a) / "engine.log").unlink(), (ok_run(a) / "engine.log").symlink_to("/etc/hostname")),
    "fifo": lambda a, out: os.mkfifo(a / "runs" / "pipe"),
    "dangling-symlink": lambda a, out: (a / "gone").symlink_to(out / "nothing"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_unlisted_entries_fail_validation_and_are_never_followed(case: str, artifact: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copytree(ok_run(artifact), outside / "copied")  # what a symlinked run folder would smuggle in
    code, out, _ = call(capsys, monkeypatch, "results", "validate", str(artifact))
    assert code == 0, out
    HOSTILE[case](artifact, outside)
    with timed("artifacts: hostile entries"):
        code, out, err = call(capsys, monkeypatch, "results", "validate", str(artifact), "--json")
    report = json.loads(out)
    assert code == 1 and not report["valid"], report
    assert any(word in " ".join(report["problems"]) for word in ("not listed", "symbolic link", "not a regular file")), report
    with timed("artifacts: hostile entries"):
        code, _, err = call(capsys, monkeypatch, "results", "report", str(artifact), "--out", str(tmp_path / "rep"))
    assert code == 2 and "invalid artifact" in err
    code, _, err = call(capsys, monkeypatch, "results", "show", str(artifact))
    assert code == 0 and "warning" in err and "tampered" in err


def test_report_never_reads_through_a_link_even_unvalidated(artifact: Path, tmp_path: Path) -> None:
    """The report's reader itself refuses a linked telemetry file (no TypeError), validation aside."""
    run = ok_run(artifact)
    (run / "telemetry.csv").symlink_to("/etc/passwd")
    with pytest.raises(BadInput, match="link"):
        load_report_data(artifact)
    (run / "telemetry.csv").unlink()
    (run / "telemetry.csv").write_text("root:x:0:0:root:/root:/bin/bash\na,b,c,d,e\n1,2\n")  # not telemetry, but no crash
    assert load_report_data(artifact).runs


def _tamper_throughput(artifact: Path) -> Path:
    result = ok_run(artifact) / "result.json"
    document = json.loads(result.read_text())
    document["measurements"]["steady"]["throughput"] *= 100
    result.write_text(json.dumps(document))
    return result


def test_resume_refuses_a_tampered_artifact(artifact: Path, capsys, monkeypatch) -> None:
    _tamper_throughput(artifact)
    manifest = file_sha256(artifact / "manifest.json")
    with timed("artifacts: resume of tampered"):
        code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local")
    assert code == 2 and "changed since bench wrote it" in err and "--force" in err and "result.json" in err
    code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--dry-run")
    assert code == 2
    assert file_sha256(artifact / "manifest.json") == manifest and not (artifact / "integrity.json").exists()  # nothing written
    code, _, _ = call(capsys, monkeypatch, "results", "validate", str(artifact))
    assert code == 1  # still caught


def test_resume_force_records_the_override(artifact: Path, capsys, monkeypatch) -> None:
    _tamper_throughput(artifact)
    code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--force", "--json")
    assert code in (0, 1) and "--force" in err, err
    record = json.loads((artifact / "integrity.json").read_text())
    (override,) = record["overrides"]
    assert override["action"] == "scenario resume --force" and override["problem_count"] == 1
    assert "result.json: sha256 differs" in override["problems"][0]
    code, _, err = call(capsys, monkeypatch, "results", "validate", str(artifact))
    assert code == 0 and "overrode 1 integrity problem" in err  # listed and hashed, and pointed out
    code, _, err = call(capsys, monkeypatch, "results", "show", str(artifact))
    assert code == 0 and "overrode 1 integrity problem" in err


def test_resume_refuses_links_and_fifos(artifact: Path, capsys, monkeypatch) -> None:
    (artifact / "runs" / "x").symlink_to("/etc", target_is_directory=True)
    code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local")
    assert code == 2 and "runs/x" in err


def declare_in_flight(artifact: Path, folder: str) -> None:
    """Make the manifest say what bench's own manifest says while a run is in flight (bench killed then)."""
    manifest = json.loads((artifact / "manifest.json").read_text())
    manifest.update(complete=False, in_flight=[folder])
    manifest["files"] = [f for f in manifest["files"] if not f["path"].startswith(folder + "/")]
    (artifact / "manifest.json").write_text(json.dumps(manifest))


def test_untampered_interrupted_artifact_still_resumes(artifact: Path, capsys, monkeypatch) -> None:
    """Unlisted files of the folder the manifest declares in flight (what an interrupted run leaves) are
    not tampering: resume proceeds; the same files outside a folder in flight are (see test_hostile_resume)."""
    run = ok_run(artifact).parent / "fake2-bf16-optimized-b16-d1-r1"
    run.mkdir()
    (run / "engine.log").write_text("partial\n")
    declare_in_flight(artifact, run.relative_to(artifact).as_posix())
    code, _, err = call(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--dry-run")
    assert code == 0, err
