"""bench_opennn.phases: the driver's events file, followed as it grows, said as bench's phase lines."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from tests.conftest import REPO

sys.path[:0] = [str(REPO / "images" / "common"), str(REPO / "images" / "opennn")]

from bench_opennn.phases import EventPhases  # noqa: E402

from bench_engine.progress import Heartbeat  # noqa: E402


def _follow(tmp_path: Path, warmup: int, timed: int) -> tuple[EventPhases, Path, io.StringIO]:
    out = io.StringIO()
    beat = Heartbeat(out=out)
    beat.phase("setup")
    events = tmp_path / "events.txt"
    events.write_text("")
    return EventPhases(events, warmup, timed, beat), events, out


def _lines(out: io.StringIO) -> list[str]:
    return [line.removeprefix("[bench-engine] phase ") for line in out.getvalue().splitlines()]


def test_the_phases_follow_the_events_as_they_are_written(tmp_path: Path) -> None:
    phases, events, out = _follow(tmp_path, warmup=2, timed=4)
    with open(events, "a") as handle:
        handle.write("applied device cuda\nsetup_do")  # a line still being written
        handle.flush()
        phases.poll()
        assert _lines(out) == ["setup"]
        handle.write("ne 12.5\nblock 1 1 1 32 0.5 2.3\n")
        handle.flush()
        phases.poll()
        assert _lines(out)[-1] == "warmup 1/2" and phases.beat.phase_name == "warmup"
        handle.write("block 1 1 1 32 0.1 2.29\n")
        handle.flush()
        phases.poll()
        assert phases.beat.phase_name == "timing"  # the warmup's last block ended: the timed steps begin
        handle.write("block 1 0 2 64 0.1 2.28\nepoch 1 4 128 0.7\nblock 2 0 2 64 0.1 2.27\napplied steps_applied 6\ndone 2.27\n")
        handle.flush()
        phases.poll()
    assert _lines(out) == ["setup", "warmup 0/2", "warmup 1/2", "warmup 2/2", "timing 0/4", "timing 4/4", "done"]


def test_no_warmup_goes_straight_to_timing_and_a_crash_stays_in_it(tmp_path: Path) -> None:
    phases, events, out = _follow(tmp_path, warmup=0, timed=3)
    events.write_text("setup_done 1.0\nblock 1 0 1 32 0.1 2.3\nblock 1 0 x 32\nerror crash fake: something broke\n")
    phases.poll()
    assert _lines(out) == ["setup", "timing 0/3"] and phases.beat.done == 1
    phases.path = tmp_path / "gone.txt"
    phases.poll()  # an unreadable file: nothing said, nothing raised
    assert phases.beat.phase_name == "timing"
