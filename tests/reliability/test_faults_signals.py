"""bench itself stopped by SIGINT, SIGTERM, SIGHUP or SIGKILL at random points of `bench scenario run`
(local runtime, fake engines; seed in $BENCH_FAULT_SEED, default 15). After each: the exit status
is the signal's (130, 143, 129; SIGKILL: killed), no engine process is left (the engine dies with
bench even after SIGKILL), the artifact validates as it is (the run in flight is declared in the
manifest), and resume completes the matrix keeping every run measured before the signal."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.reliability.faults_helpers import (
    SELECT,
    bench_env,
    engines_left,
    figures_fixture,
    measured,
    records,
    resume_completes,
    start_bench,
    the_artifact,
    validate,
    write_scenario,
)

figures = figures_fixture("signals")
SEED = int(os.environ.get("BENCH_FAULT_SEED", "15"))
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL, signal.SIGKILL]
# One random instant per case, from bench's start; two fake runs of ~0.1 s x 8 steps each take a few seconds.
POINTS = [round(random.Random(SEED * 100 + i).uniform(2.0, 8.0), 2) for i in range(len(SIGNALS))]
CASES = [pytest.param(sig, at, id=f"{sig.name}-at-{at}s") for sig, at in zip(SIGNALS, POINTS, strict=True)]


@pytest.mark.parametrize(("sig", "at"), CASES)
def test_bench_stopped_by_a_signal_leaves_a_valid_artifact_that_resume_completes(sig, at, tmp_path: Path, data_dir: Path, figures) -> None:
    scenario = write_scenario(tmp_path, step_s=0.1)
    out = tmp_path / "out"
    env = bench_env(data_dir)
    proc = start_bench("scenario", "run", str(scenario), "--runtime", "local", "--out", str(out), *SELECT, env=env)
    clock = time.monotonic()
    try:
        proc.wait(timeout=at)
        finished_first = True
    except subprocess.TimeoutExpired:
        finished_first = False
        proc.send_signal(sig)
    output, _ = proc.communicate(timeout=90)
    stop_s = time.monotonic() - clock - (0 if finished_first else at)
    if finished_first:
        assert proc.returncode == 0, output
    elif sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode in (128 + sig, -sig, 0), output  # -sig: still starting; 0: the signal came after the last run
        assert stop_s < 30, f"bench took {stop_s:.1f} s to stop after {sig.name}"
    artifact = the_artifact(out)
    if artifact is None:  # stopped before the artifact existed: nothing was measured, nothing half-written
        assert not any(p for p in out.rglob("*.json")), sorted(out.rglob("*"))
        assert proc.returncode in (128 + sig, -sig), output  # -sig: while Python was still starting (no handler yet)
        figures.add(f"{sig.name} at {at} s", "before the artifact", stop_s)
        return
    assert engines_left(str(artifact)) == [], "an engine outlived bench"
    check = validate(artifact, env)
    assert check.returncode == 0, f"{sig.name} at {at} s: " + check.stdout + check.stderr
    statuses = {run_id: record["status"] for run_id, record in records(artifact).items()}
    if sig != signal.SIGKILL:
        assert proc.returncode != -sig, "killed by the signal's default action after the artifact existed"
        if proc.returncode == 128 + sig:
            # a run cut short, or the signal came after the last run (while bench wrote the summary: all ok, still 128+sig)
            assert ("interrupted" in statuses.values() or "skipped" in statuses.values() or len(statuses) < 2
                    or set(statuses.values()) == {"ok"}), statuses
    before = measured(artifact)
    clock = time.monotonic()
    resume_completes(artifact, env, before)
    figures.add(f"{sig.name} at {at} s", f"exit {proc.returncode}, valid, {len(before)} measured kept, resumed", stop_s,
                statuses=statuses, resume_seconds=round(time.monotonic() - clock, 2))


def test_the_engine_dies_with_a_sigkilled_bench(tmp_path: Path, data_dir: Path, figures) -> None:
    """Deterministic: bench SIGKILLed while its engine hangs; the engine (own session, so no
    terminal signal reaches it) must end by itself within seconds: its parent-death signal."""
    import psutil

    scenario = write_scenario(tmp_path)
    env = bench_env(data_dir, BENCH_FAKE_FAULT="fake-fp32-optimized-b16-d1-r1:hang")
    proc = start_bench("scenario", "run", str(scenario), "--runtime", "local", "--out", str(tmp_path / "out"), *SELECT, "-v", env=env)
    engine_pid = None
    for line in proc.stdout:
        if "hanging (pid " in line:
            engine_pid = int(line.split("hanging (pid ")[1].split(")")[0])
            break
    assert engine_pid is not None
    engine = psutil.Process(engine_pid)
    proc.kill()
    proc.wait(timeout=30)
    clock = time.monotonic()
    try:
        engine.wait(timeout=20)
    except psutil.TimeoutExpired:
        engine.kill()
        pytest.fail("the engine outlived bench by 20 s")
    figures.add("engine after SIGKILL of bench", "ended by its parent-death signal", time.monotonic() - clock)
