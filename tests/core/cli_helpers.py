"""Run the bench CLI in-process (exit code, stdout, stderr) and the fake engines' setup."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FAKE_SCENARIO = FIXTURES / "fake_scenario.yaml"


def use_fake_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.engines.registry import discover

    monkeypatch.setenv("BENCH_ENGINE_PATH", os.pathsep.join([str(FIXTURES / "fake_engine"), str(FIXTURES / "fake_engine2")]))
    discover.cache_clear()


def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    from orchestrator.cli.app import main

    monkeypatch.setattr(sys, "argv", ["bench", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    """Exit code 2 and one line on stderr, 'error: ...', holding every needle."""
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error:") and "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
