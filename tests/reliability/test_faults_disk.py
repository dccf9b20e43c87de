"""Disk full while bench writes the artifact (ENOSPC injected into bench's atomic writes, in
process; the fake engines run as usual). At each point: one line naming the cause, exit 2, no
traceback; the artifact (when it exists) validates as it is; resume, with room again, completes
the matrix keeping every run measured before."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path

import pytest

from orchestrator.artifacts import validate_artifact
from tests.core.cli_helpers import run_cli, use_fake_engines
from tests.reliability.faults_helpers import RUN_IDS, SELECT, figures_fixture, measured, records, the_artifact, write_scenario

figures = figures_fixture("disk")
# bench's atomic writes, in order: 1 the first manifest; per run: in-flight manifest, spec, run.json, manifest; summary; manifest
POINTS = {1: "first manifest", 3: "spec of run 1", 6: "in-flight manifest of run 2", 8: "run.json of run 2", 10: "summary"}


@pytest.mark.parametrize("fail_at", list(POINTS), ids=[f"write-{n}-{what.replace(' ', '-')}" for n, what in POINTS.items()])
def test_disk_full_leaves_a_valid_artifact_that_resume_completes(fail_at, tmp_path: Path, data_dir: Path, monkeypatch, capsys, figures) -> None:
    import orchestrator.jsonio as jsonio

    use_fake_engines(monkeypatch)
    scenario = write_scenario(tmp_path)
    out = tmp_path / "out"
    real = jsonio.write_text_atomic
    calls = [0]

    def full_disk(path: Path, text: str) -> None:
        if out not in Path(path).parents:  # the dataset cache is elsewhere
            return real(path, text)
        calls[0] += 1
        if calls[0] >= fail_at:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, text)

    monkeypatch.setattr(jsonio, "write_text_atomic", full_disk)
    clock = time.monotonic()
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "run", str(scenario), "--runtime", "local", "--out", str(out), *SELECT)
    seconds = time.monotonic() - clock
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]  # progress lines come before it
    assert "Traceback" not in err and len(errors) == 1 and "No space left on device" in errors[0], err
    artifact = the_artifact(out)
    if artifact is None:  # the first manifest could not be written: no half-made artifact is left
        assert fail_at == 1 and not list(out.rglob("*.json"))
        figures.add(f"disk full at {POINTS[fail_at]}", "exit 2, no artifact", seconds)
        return
    assert validate_artifact(artifact) == [], validate_artifact(artifact)
    before = measured(artifact)
    monkeypatch.setattr(jsonio, "write_text_atomic", real)  # room again
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "resume", str(artifact), "--json")
    assert code == 0, err
    runs = records(artifact)
    assert sorted(runs) == sorted(RUN_IDS) and {r["status"] for r in runs.values()} == {"ok"}
    assert all(measured(artifact).get(run_id) == digest for run_id, digest in before.items()), "a measured run was lost"
    assert validate_artifact(artifact) == []
    assert json.loads((artifact / "manifest.json").read_text())["complete"] is True
    figures.add(f"disk full at {POINTS[fail_at]}", f"exit 2, valid, {len(before)} measured kept, resumed", seconds)
