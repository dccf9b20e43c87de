"""Fixtures of the dataset tests: a private cache per test, a CIFAR-10-layout archive, `bench` as a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.data.cifar_fixture import Fixture, make_cifar_archive


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, empty BENCH_DATA_DIR for one test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("BENCH_DATA_DIR", str(path))
    return path


@pytest.fixture(scope="session")
def cifar_archive(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    """20 samples per batch: 100 train, 20 test."""
    return make_cifar_archive(tmp_path_factory.mktemp("cifar"))


class BenchResult:
    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr

    def json(self):
        return json.loads(self.stdout)


@pytest.fixture()
def bench(cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., BenchResult]:
    """Run ``bench ARGS`` in this process through the console entry main() (exit code, stdout, stderr)."""
    from tests.core.cli_helpers import run_cli

    def run(*args: str) -> BenchResult:
        capsys.readouterr()
        return BenchResult(*run_cli(capsys, monkeypatch, *args))

    return run


@pytest.fixture()
def bench_process(cache: Path) -> Callable[..., BenchResult]:
    """Run the installed ``bench`` console script as a subprocess."""
    executable = shutil.which("bench")
    command = [executable] if executable else [sys.executable, "-c", "from orchestrator.cli.app import main; main()"]

    def run(*args: str, timeout: float = 120) -> BenchResult:
        proc = subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "BENCH_DATA_DIR": str(cache)})
        return BenchResult(proc.returncode, proc.stdout, proc.stderr)

    return run
