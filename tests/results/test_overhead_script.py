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


def _report(tmp_path: Path, pairs: list[overhead.Pair], planned: int) -> Path:
    args = overhead.argparse.Namespace(engine="pytorch", precision="bf16", scenario="s.yaml", pairs=planned, warmup=1,
                                       telemetry_off=False)
    path = tmp_path / f"report{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(overhead.report(args, pairs)))
    return path


def _timed(throughput_bench: float, command_s: float, engine_s: float = 29.0) -> overhead.Pair:
    return overhead.Pair(throughput_bench, 1000.0, command_s, engine_s, 28.0, "/a", {}, {}, {}, {})


def test_check_says_met_for_five_pairs_within_the_goal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _report(tmp_path, [_timed(t, 30.5) for t in (985, 995, 1000, 1005, 1010)], 5)
    assert overhead.main(["--check", str(path)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(": met")


@pytest.mark.parametrize(("pairs", "planned", "why"), [
    ([_timed(t, 30.5) for t in (970, 980, 985, 1000, 1010)], 5, "median ratio bench/direct 0.985 < 0.99"),
    ([_timed(1000, 30.5)] * 4 + [_timed(1000, 31.2)], 5, "outside the engine process up to 2.20 s > 2 s"),  # one pair is enough
    ([_timed(1000, 30.5)] * 3, 5, "3 of 5 pairs planned done"),  # a campaign cut off
    ([_timed(1000, 30.5)] * 3, 3, "3 of 3 pairs planned done"),  # complete, too few for the goal
])
def test_check_names_what_a_report_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str], pairs: list[overhead.Pair],
                                          planned: int, why: str) -> None:
    met = _report(tmp_path, [_timed(1000, 30.5)] * 5, 5)
    assert overhead.main(["--check", str(met), str(_report(tmp_path, pairs, planned))]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(": met") and "NOT met" in lines[1] and why in lines[1]


def test_check_refuses_what_is_not_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "other.json").write_text('{"pairs": 5}')
    (tmp_path / "broken.json").write_text("{")
    assert overhead.main(["--check", str(tmp_path / "other.json"), str(tmp_path / "broken.json"), str(tmp_path / "none.json")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and all("not an overhead report" in line for line in out)


def test_the_published_session_9_reports_meet_the_goal(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200" / "issue26_round2" / "session9"
    reports = sorted(folder.glob("overhead_*_bf16.json"))
    assert [p.name for p in reports] == ["overhead_jax_bf16.json", "overhead_pytorch_bf16.json"]
    assert overhead.main(["--check", *map(str, reports)]) == 0
