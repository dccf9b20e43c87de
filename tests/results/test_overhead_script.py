"""benchmarks/overhead.py: the direct run gets the environment bench's local runtime gives the engine, the engine's
``prepare:`` parts are read back per side, and a campaign cut off after some pairs keeps them in --json-out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "images" / "common"))

import overhead

from bench_engine.setupclock import SetupClock
from orchestrator.engines.registry import get_engine
from orchestrator.runtimes.local import FIXED_ENV


def test_prepare_parts_reads_the_engines_setupclock_line() -> None:
    clock = SetupClock()
    clock.parts = {"model and weights": 2.5, "on the device": 0.75, "steps built": 9.27}
    log = f"[bench-engine] start\n[bench-engine] {clock.line()}\n[bench-engine] warmup\n"
    assert overhead.prepare_parts(log) == {"model and weights": 2.5, "on the device": 0.75, "steps built": 9.27}


def test_prepare_parts_takes_the_last_line_and_skips_untimed_parts() -> None:
    log = ("[bench-engine] prepare: model and weights 1.00s\n"
           "[bench-engine] prepare: model and weights 0.55s, on the device, steps built 9.27s\n")
    assert overhead.prepare_parts(log) == {"model and weights": 0.55, "steps built": 9.27}
    assert overhead.prepare_parts("[bench-engine] no such line\n") == {}


def test_direct_environment_is_the_local_runtimes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))  # a campaign's own packages (jsonschema, safetensors)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    env = overhead.engine_env("pytorch")
    folders = env["PYTHONPATH"].split(":")
    assert folders == [*map(str, get_engine("pytorch").python_path()), str(tmp_path / "site")]
    assert {key: env[key] for key in FIXED_ENV} == FIXED_ENV
    assert "TORCHINDUCTOR_CACHE_DIR" in env


def _pair(index: int) -> overhead.Pair:
    return overhead.Pair(1000.0 + index, 1000.0, 30.0, 29.0, 28.0, f"/a/{index}", {"setup.prepare_s": 15.0},
                         {"setup.prepare_s": 9.0}, {"steps built": 12.0}, {"steps built": 6.0})


def test_a_cut_off_campaign_keeps_its_pairs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    calls: list[Path | None] = []

    def fake_pair(args: object, folder: Path, spec: Path | None) -> tuple[overhead.Pair, Path]:
        calls.append(spec)
        if len(calls) == 3:
            raise subprocess.CalledProcessError(137, "bench scenario run", "", "killed")
        return _pair(len(calls)), tmp_path / f"spec{len(calls)}.json"

    monkeypatch.setattr(overhead, "run_pair", fake_pair)
    monkeypatch.setattr(overhead.tempfile, "mkdtemp", lambda prefix: str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["overhead.py", "s.yaml", "pytorch", "bf16", "--pairs", "5", "--warmup", "0",
                                      "--json-out", str(out)])
    assert overhead.main() == 1
    doc = json.loads(out.read_text())
    assert (doc["pairs"], doc["pairs_planned"], doc["complete"]) == (2, 5, False)
    assert [run["throughput_bench"] for run in doc["runs"]] == [1001.0, 1002.0]
    assert doc["runs"][0]["prepare_bench"] == {"steps built": 12.0}
    assert calls[1] == tmp_path / "spec1.json"  # pair 2 runs the engine first, on pair 1's spec
    assert [path.name for path in tmp_path.iterdir()] == ["overhead.json"]  # no temporary file left beside it
