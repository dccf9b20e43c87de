"""Bounded failure and visible progress: heartbeats, stall detection, phase lines in the progress display.

The launcher's side (several worker processes, a rank blocked in a collective) is in
test_launch.py; here: the heartbeat record and the launcher's choice of the rank to blame, a
single-process engine that watches itself (through ``bench scenario run``, so the stall limit
travels from the scenario to the spec), and the display of the phase lines.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from bench_engine.progress import Heartbeat, new_record, read_record
from bench_engine.watch import RankWatch
from orchestrator.cli import reporter as reporter_module
from orchestrator.cli.phases import PhaseBoard, parse
from orchestrator.scenario import RunPlan
from tests.core.cli_helpers import FAKE_SCENARIO, run_cli, use_fake_engines


def test_heartbeat_writes_its_record_and_throttles_its_lines(tmp_path: Path) -> None:
    out = io.StringIO()
    beat = Heartbeat(new_record(tmp_path / "r0"), out=out)
    beat.phase("timing", 100)
    for _ in range(99):
        beat.step()
    record = read_record(tmp_path / "r0")
    assert record is not None and (record.phase, record.done, record.total, record.beats) == ("timing", 99, 100, 100)
    beat.step()
    # the phase change and the last step are said; the 98 steps in between came within the 5 s interval
    assert out.getvalue().splitlines() == ["[bench-engine] phase timing 0/100", "[bench-engine] phase timing 100/100"]
    warm = io.StringIO()
    beat = Heartbeat(out=warm)
    beat.phase("warmup", 3)
    beat.step()
    beat.step()
    # the first warmup step (compilation over) is said at once; the second came within the 1 s interval
    assert warm.getvalue().splitlines() == ["[bench-engine] phase warmup 0/3", "[bench-engine] phase warmup 1/3"]


def test_the_rank_behind_is_blamed(tmp_path: Path) -> None:
    beats = [Heartbeat(new_record(tmp_path / f"r{rank}"), out=io.StringIO()) for rank in range(3)]
    watch = RankWatch([tmp_path / f"r{rank}" for rank in range(3)], stall_s=0.3, setup_stall_s=60)
    for rank, beat in enumerate(beats):
        beat.phase("timing", 10)
        for _ in range(3 if rank == 1 else 5):
            beat.step()
    assert watch.poll({0, 1, 2}) == []
    time.sleep(0.4)
    blamed = watch.poll({0, 1, 2})
    assert [s.rank for s in blamed] == [1]  # 3 steps where the others made 5
    message = watch.stall_message(blamed, 3)
    assert message.startswith("rank 1 of 3 stalled in timing: no progress for 0 s (limit measurement.stall_s = 0.3 s) after step 3/10")
    assert "rank 0 timing 5/10" in message and "rank 2 timing 5/10" in message
    beats[0].phase("setup")  # rank 0 back in a setup phase: the generous bound applies to it
    time.sleep(0.4)
    assert [s.rank for s in watch.poll({0, 1, 2})] == [1]
    assert watch.poll({0, 2}) == [watch.ranks[2]]  # rank 1 gone: rank 2 is the stalled one left
    watch.output(2)  # a line of output is progress too
    assert watch.poll({0, 2}) == []


def test_ranks_stopped_together_are_blamed_together(tmp_path: Path) -> None:
    """Two ranks stop at the same step a moment apart: when the first crosses the limit both are named."""
    beats = [Heartbeat(new_record(tmp_path / f"r{rank}"), out=io.StringIO()) for rank in range(3)]
    watch = RankWatch([tmp_path / f"r{rank}" for rank in range(3)], stall_s=10, setup_stall_s=60)
    for beat in beats:
        beat.phase("timing", 10)
        beat.step()
    assert watch.poll({0, 1, 2}) == []
    now = time.monotonic()
    watch.ranks[0].last_progress, watch.ranks[1].last_progress, watch.ranks[2].last_progress = now - 11, now - 9, now - 4
    assert [s.rank for s in watch.poll({0, 1, 2})] == [0, 1]  # rank 1 is 1 s short of the limit, rank 2 is not idle
    watch.ranks[0].last_progress = now - 9
    assert watch.poll({0, 1, 2}) == []  # nobody past the limit: nobody blamed


def test_phase_lines_parse_and_render_per_rank() -> None:
    assert parse("[rank 1] [bench-engine] phase warmup 5/20") == parse("[rank 1] [bench-engine] phase warmup 5/20  ")
    assert parse("[bench-engine] phase setup").rank is None  # type: ignore[union-attr]
    assert parse("[bench-engine] setup done in 2.0s") is None and parse("[rank 0] phase warmup 1/2") is None
    board = PhaseBoard()
    assert board.update("[rank 1] [bench-engine] phase warmup 4/20")[1] is True
    assert board.update("[rank 0] [bench-engine] phase warmup 5/20")[1] is True
    assert board.update("[rank 0] [bench-engine] phase warmup 6/20")[1] is False  # same phase, more steps
    assert board.text() == "rank 0: warmup 6/20, rank 1: warmup 4/20"


def test_display_without_a_terminal_prints_phase_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    printed: list[str] = []
    monkeypatch.setattr(reporter_module.err, "print", lambda text, *a, **k: printed.append(str(text)))
    shown = reporter_module.RichReporter(live=False)
    shown.run_started(1, 2, RunPlan("pytorch", "bf16", "optimized", 128, 2, 1))
    for line in ["[bench-engine] launching 2 worker processes", "[rank 0] [bench-engine] phase setup",
                 "[rank 0] [bench-engine] phase warmup 0/20", "[rank 1] [bench-engine] phase warmup 0/20",
                 "[rank 1] [bench-engine] phase warmup 1/20", "[rank 1] some other output"]:
        shown.engine_line(line)
    label = "[1/2] pytorch bf16 optimized b128 x2 #1"
    assert printed[0] == f"{label}  [dim]rank 0: setup[/]"  # the first phase line of the run
    assert printed[1:] == [f"{label}  [dim]rank 0: warmup 0/20[/]", f"{label}  [dim]rank 0: warmup 0/20, rank 1: warmup 0/20[/]"]
    monkeypatch.setattr(reporter_module, "PLAIN_INTERVAL_S", 0.0)  # later lines: once an interval has passed
    shown.engine_line("[rank 1] [bench-engine] phase warmup 2/20")
    assert printed[-1] == f"{label}  [dim]rank 0: warmup 0/20, rank 1: warmup 2/20[/]"
    quiet = reporter_module.RichReporter(quiet=True, live=False)
    quiet.run_started(1, 1, RunPlan("jax", "bf16", "optimized", 128, 2, 1))
    count = len(printed)
    quiet.engine_line("[bench-engine] phase warmup 0/20")
    assert len(printed) == count  # --json: nothing on stderr


STALL_S = 3.0


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_single_process_engine_that_stalls_fails_as_stalled(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path, data_dir: Path) -> None:
    """The fake engine blocks at its 2nd step (first timed step): its own watchdog dumps the stacks and fails the run."""
    use_fake_engines(monkeypatch)
    monkeypatch.setenv("BENCH_FAULT", "0:2:block")
    clock = time.monotonic()
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--engines", "fake",
                             "--precisions", "fp32", "--set", f"measurement.stall_s={STALL_S}", "--out", str(tmp_path), "--json")
    elapsed = time.monotonic() - clock
    assert code == 1, err
    run_dir = next(Path(json.loads(out)["artifact"]).glob("runs/*"))
    spec, record, result = (json.loads((run_dir / name).read_text()) for name in ("spec.json", "run.json", "result.json"))
    assert spec["measurement"]["stall_s"] == STALL_S and spec["measurement"]["setup_stall_s"] == 900
    assert record["status"] == "failed", record
    assert record["reason"].startswith(f"stalled: stalled in timing: no progress for 3 s (limit measurement.stall_s = {STALL_S:g} s) "
                                       "after step 0/7"), record["reason"]
    assert result["failure"]["kind"] == "stalled"
    log = (run_dir / "engine.log").read_text()
    assert "(most recent call first)" in log and "in faulty_step" in log  # where it hung
    assert "[bench-engine] phase timing 0/7" in log
    assert elapsed < STALL_S + 15, elapsed
