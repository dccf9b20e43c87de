"""Artifacts, reports and archives get ordinary modes: 0666/0777 less the umask, never a forced 0600."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.cli_helpers import FAKE_SCENARIO, run_cli


@pytest.fixture()
def umask() -> Iterator[None]:
    """Run the test under umask 022 (the usual one), restored afterwards."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(root: Path) -> dict[str, str]:
    """Relative path -> octal mode of every entry under ``root`` (the root included, as '.')."""
    return {p.relative_to(root).as_posix(): oct(stat.S_IMODE(p.lstat().st_mode)) for p in [root, *root.rglob("*")]}


def odd(found: dict[str, str], root: Path) -> dict[str, str]:
    """The entries whose mode is not 0644 (files) or 0755 (folders)."""
    return {rel: mode for rel, mode in found.items() if mode != ("0o755" if (root / rel).is_dir() else "0o644")}


@pytest.mark.usefixtures("fake_engines", "umask")
def test_a_fresh_artifact_its_report_and_archive_have_ordinary_modes(capsys, monkeypatch, tmp_path):
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--engines", "fake",
                             "--precisions", "fp32", "--out", str(tmp_path / "results"), "--json")
    assert code == 0, err
    artifact = Path(json.loads(out)["artifact"])
    found = modes(artifact)
    assert {"manifest.json", "summary.json", "scenario.yaml"} <= set(found)
    assert any(rel.endswith("/result.json") for rel in found) and any(rel.endswith("/run.json") for rel in found)
    assert odd(found, artifact) == {}
    code, out, err = run_cli(capsys, monkeypatch, "results", "report", str(artifact), "--html", "--json")
    assert code == 0, err
    report = Path(json.loads(out)["out"])
    assert odd(modes(report), report) == {}
    code, out, err = run_cli(capsys, monkeypatch, "results", "archive", str(artifact), "--json")
    assert code == 0, err
    assert oct(stat.S_IMODE(Path(json.loads(out)["archive"]).stat().st_mode)) == "0o644"


def test_the_atomic_writer_follows_the_umask(tmp_path: Path) -> None:
    from orchestrator.jsonio import write_json, write_text_atomic

    previous = os.umask(0o027)
    try:
        write_text_atomic(tmp_path / "a.txt", "a\n")
        write_json(tmp_path / "sub" / "b.json", {"b": 1})
    finally:
        os.umask(previous)
    assert modes(tmp_path) == {".": modes(tmp_path)["."], "a.txt": "0o640", "sub": "0o750", "sub/b.json": "0o640"}
    assert [p.name for p in tmp_path.rglob(".*")] == []  # no temporary file left behind
