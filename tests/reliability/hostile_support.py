"""Shared by the fuzz and hostile-input tests: fake engines, the in-process CLI, and the figures
(examples run, slowest example, disk used) each test file adds to ``figures/hostile.json``, which
the README's "Hostile input" section quotes from the last run."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.core.cli_helpers import FAKE_SCENARIO, run_cli, use_fake_engines

FIGURES = Path(__file__).parent / "figures" / "hostile.json"
EXAMPLE_BOUND_S = 2.0  # every example (one CLI call, in-process) must answer within this
_figures: dict[str, dict[str, Any]] = {}

__all__ = ["EXAMPLE_BOUND_S", "FAKE_SCENARIO", "call", "disk_bytes", "fake_engines", "record", "save_figures", "timed"]


@pytest.fixture()
def fake_engines(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> Iterator[None]:
    use_fake_engines(monkeypatch)
    yield
    from orchestrator.engines.registry import discover

    monkeypatch.delenv("BENCH_ENGINE_PATH", raising=False)
    discover.cache_clear()


def record(group: str, seconds: float, disk: int = 0) -> None:
    """Count one example of ``group``; keep its slowest time and largest disk use."""
    entry = _figures.setdefault(group, {"examples": 0, "max_s": 0.0, "max_disk_bytes": 0})
    entry["examples"] += 1
    entry["max_s"] = round(max(entry["max_s"], seconds), 4)
    entry["max_disk_bytes"] = max(entry["max_disk_bytes"], disk)


@contextmanager
def timed(group: str) -> Iterator[dict[str, Any]]:
    """Time the block and record it (``box['disk']`` may be set inside); fails past EXAMPLE_BOUND_S."""
    box: dict[str, Any] = {"disk": 0}
    start = time.perf_counter()
    yield box
    elapsed = time.perf_counter() - start
    record(group, elapsed, box["disk"])
    assert elapsed < EXAMPLE_BOUND_S, f"{group}: {elapsed:.2f} s, bound {EXAMPLE_BOUND_S} s"


def call(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """The CLI in-process; asserts it answered as bench answers any input: exit 0, 1 or 2 and never a traceback."""
    code, out, err = run_cli(capsys, monkeypatch, *args)
    assert "Traceback" not in err and "internal error" not in err, err
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), err
    return code, out, err


def disk_bytes(folder: Path) -> int:
    """Bytes of disk the files under ``folder`` occupy (allocated blocks, so sparse files count as written)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def save_figures() -> None:
    """Merge this module's figures into figures/hostile.json (one entry per group, from the last run)."""
    FIGURES.parent.mkdir(exist_ok=True)
    try:
        merged = json.loads(FIGURES.read_text())
    except (OSError, ValueError):
        merged = {}
    merged.update(_figures)
    FIGURES.write_text(json.dumps(dict(sorted(merged.items())), indent=2) + "\n")
    _figures.clear()


_BUILT: dict[str, Path] = {}


def fake_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of one real artifact (fake fp32 ok, fake2 fp32 crashed), made once per test session."""
    if "base" not in _BUILT:
        out = tmp_path / "base"
        code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(out),
                            "--precisions", "fp32", "--set", "engines.fake2.options.behaviour=crash", "--json")
        assert code == 1, err  # one run failed
        (_BUILT["base"],) = (out / "fake_tiny").iterdir()
    copy = tmp_path / "art"
    shutil.copytree(_BUILT["base"], copy, symlinks=True)
    return copy


# the fuzz tests' hypothesis settings: derandomized (the same examples in every CI run) unless BENCH_FUZZ_RANDOM is set
FUZZ = settings(max_examples=int(os.environ.get("BENCH_FUZZ_EXAMPLES", "150")), deadline=None, database=None,
                derandomize=not os.environ.get("BENCH_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])


def ok_run(artifact: Path) -> Path:
    """The fake engine's ok run folder of :func:`fake_artifact`."""
    return next(artifact.glob("runs/fake-fp32-*"))
