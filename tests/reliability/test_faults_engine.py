"""Engine faults (local runtime, fake engines): a crash, a hang past the timeout, and the host's OOM
killer (the engine SIGKILLed from outside). After each: the run is recorded with its cause, the
artifact validates, no engine process is left, and resume (the fault gone) completes the matrix
keeping the run that was measured before."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.reliability.faults_helpers import (
    RUN_IDS,
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

figures = figures_fixture("engine")
FAULTY = RUN_IDS[1]  # the second run of the matrix; the first is measured before it and must survive
TIMEOUT_S = 4


@pytest.mark.parametrize(("fault", "status", "reason"), [
    ("crash", "failed", "engine was killed by SIGABRT and wrote no result file"),
    ("hang", "timeout", f"exceeded the {TIMEOUT_S} s timeout; stopped"),
    ("oom_kill", "failed", "engine was killed by SIGKILL (the kernel's OOM killer"),
])
def test_engine_fault_leaves_a_valid_artifact_that_resume_completes(fault, status, reason, tmp_path: Path, data_dir: Path, figures) -> None:
    scenario = write_scenario(tmp_path, timeout_s=TIMEOUT_S)
    out = tmp_path / "out"
    injected = "hang" if fault == "oom_kill" else fault
    env = bench_env(data_dir, BENCH_FAKE_FAULT=f"{FAULTY}:{injected}")
    clock = time.monotonic()
    proc = start_bench("scenario", "run", str(scenario), "--runtime", "local", "--out", str(out), *SELECT, "--verbose", env=env)
    output = ""
    if fault == "oom_kill":  # the kernel's OOM killer, as seen by bench: SIGKILL from outside
        for line in proc.stdout:
            output += line
            found = re.search(r"hanging \(pid (\d+)\)", line)
            if found:
                os.kill(int(found.group(1)), signal.SIGKILL)
                break
    rest, _ = proc.communicate(timeout=120)
    output += rest
    seconds = time.monotonic() - clock
    assert proc.returncode == 1, output
    artifact = the_artifact(out)
    runs = records(artifact)
    assert runs[RUN_IDS[0]]["status"] == "ok"
    assert runs[FAULTY]["status"] == status and reason in runs[FAULTY]["reason"], runs[FAULTY]
    check = validate(artifact, env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert engines_left(str(artifact)) == []
    if fault == "hang":
        assert seconds < TIMEOUT_S + 60  # the timeout, the stop's grace, and the start of two engines
    before = measured(artifact)
    assert list(before) == [RUN_IDS[0]]
    clock = time.monotonic()
    resume_completes(artifact, bench_env(data_dir), before)
    figures.add(f"engine {fault}", "recorded, valid, resumed", seconds, resume_seconds=round(time.monotonic() - clock, 2))
