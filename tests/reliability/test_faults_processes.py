"""Every process an engine starts ends with its run: after the run, and after a SIGKILL of bench.

The fake engine's ``spawn`` behaviour starts three sleepers as an engine's libraries might: a
plain child (the engine's process group), a child in a session of its own, and an orphan (its
parent exits at once, so it is re-parented). bench runs as a child process; each pid is checked
by pid and creation time (a reused pid is not mistaken for a survivor).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.reliability.faults_helpers import FAKE_SCENARIO, bench_env, figures_fixture, run_bench, start_bench

figures = figures_fixture("processes")
SPAWNED = re.compile(r"spawned pids (\d+) (\d+) (\d+)")


def scenario(folder: Path, behaviour: str) -> Path:
    path = folder / "scenario.yaml"
    path.write_text(FAKE_SCENARIO.read_text() + f"engines:\n  fake: {{options: {{behaviour: {behaviour}}}}}\n")
    return path


def spawned(out: Path, wait_s: float = 60.0) -> list[int]:
    """The pids of the engine's sleepers, read from the run's engine.log as soon as it says them."""
    deadline = time.monotonic() + wait_s
    while True:
        for log in out.glob("**/engine.log"):
            match = SPAWNED.search(log.read_text(errors="replace"))
            if match:
                return [int(pid) for pid in match.groups()]
        if time.monotonic() >= deadline:
            raise AssertionError("the engine never said its children's pids")
        time.sleep(0.1)


def survivors(pids: list[int], since: float, wait_s: float) -> list[int]:
    """The sleepers still running after ``wait_s``: a live process of that pid created after ``since``
    (epoch seconds, before the run) and before the check began (not a reused pid), not a zombie."""
    until = time.time()
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for pid in pids:
            try:
                proc = psutil.Process(pid)
                if since - 1 <= proc.create_time() <= until and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                continue
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def kill_all(pids: list[int], since: float) -> None:
    for pid in survivors(pids, since, 0):
        psutil.Process(pid).kill()


def test_an_engines_children_end_with_its_run(tmp_path: Path, data_dir: Path, figures) -> None:
    env, out = bench_env(data_dir), tmp_path / "out"
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # not the run's: must be left alone
    start, since = time.monotonic(), time.time()
    proc = run_bench("scenario", "run", str(scenario(tmp_path, "spawn")), "--runtime", "local", "--out", str(out),
                     "--engines", "fake", "--precisions", "fp32", env=env)
    elapsed = time.monotonic() - start
    pids = spawned(out, wait_s=0)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        left = survivors(pids, since, wait_s=0)
        assert not left, f"children of the engine outlived its run: {left}"
        assert bystander.poll() is None, "a process that is not the run's was ended"
    finally:
        bystander.kill()
        bystander.wait()
        kill_all(pids, since)
    figures.add("engine children after the run", "all 3 ended (child, own session, orphan)", elapsed)


def test_an_engines_children_end_when_bench_is_sigkilled(tmp_path: Path, data_dir: Path, figures) -> None:
    env, out = bench_env(data_dir), tmp_path / "out"
    proc = start_bench("scenario", "run", str(scenario(tmp_path, "spawn_hang")), "--runtime", "local", "--out", str(out),
                       "--engines", "fake", "--precisions", "fp32", env=env)
    pids: list[int] = []
    since = time.time()
    try:
        pids = spawned(out)
        time.sleep(1.0)  # the guard notes the run's processes every 0.25 s
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proc.communicate(timeout=30)
        left = survivors(pids, since, wait_s=20.0)
        assert not left, f"children of the engine outlived bench's SIGKILL: {left}"
        figures.add("engine children after SIGKILL of bench", "all 3 ended by the run's guard", time.monotonic() - killed)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(pids, since)
