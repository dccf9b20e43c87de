"""A Slurm job ends its engine when bench stops following it (bench SIGKILLed: nobody is left to scancel).

The job script is run by bash here, as the batch host would run it; no Slurm is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator.errors import BadInput
from orchestrator.runtimes.slurm_job import JobRequest, job_script, lifeline_path, lifeline_seconds

ENGINE = """import sys, time, pathlib
pathlib.Path(sys.argv[-1] + ".pid").write_text(str(__import__('os').getpid()))
time.sleep(float(__import__('os').environ.get('ENGINE_SECONDS', '600')))
pathlib.Path(sys.argv[-1]).write_text('{}')
"""


def _job(tmp_path: Path, lifeline_s: float) -> JobRequest:
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "sleepy_engine.py").write_text(ENGINE)
    return JobRequest(job_name="bench-x", workdir=run, output=run / "engine.log", spec=run / "spec.json", result=run / "result.json",
                      dataset=tmp_path, module="sleepy_engine", interpreter=sys.executable, python_path=[tmp_path / "mod"],
                      lifeline_s=lifeline_s)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start(job: JobRequest, seconds: float) -> subprocess.Popen[str]:
    script = job.workdir / "job.sh"
    script.write_text(job_script(job))
    return subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PATH": "/usr/bin:/bin", "ENGINE_SECONDS": str(seconds)})


def test_a_stale_lifeline_stops_the_engine(tmp_path: Path) -> None:
    job = _job(tmp_path, lifeline_s=2)
    lifeline_path(job).touch()  # bench touched it once, then was killed
    started = time.monotonic()
    proc = _start(job, seconds=600)
    _, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - started
    pid = int(job.result.with_name("result.json.pid").read_text())
    assert proc.returncode == 143, err
    assert "no sign of bench" in err and "lifeline 2 s" in err
    assert elapsed < 20 and not _alive(pid)
    assert not job.result.exists()


def test_a_fresh_lifeline_lets_the_engine_finish(tmp_path: Path) -> None:
    job = _job(tmp_path, lifeline_s=2)
    stop = threading.Event()

    def bench_follows() -> None:  # what the runtime's poll loop does
        while not stop.is_set():
            lifeline_path(job).touch()
            time.sleep(0.3)

    follower = threading.Thread(target=bench_follows, daemon=True)
    follower.start()
    try:
        proc = _start(job, seconds=5)
        _, err = proc.communicate(timeout=60)
    finally:
        stop.set()
    assert proc.returncode == 0, err
    assert "no sign of bench" not in err and job.result.read_text() == "{}"


def test_without_lifeline_the_engine_is_exec_ed(tmp_path: Path) -> None:
    script = job_script(_job(tmp_path, lifeline_s=0))
    assert any(line.startswith("exec ") for line in script.splitlines()) and ".bench-lifeline" not in script


@pytest.mark.parametrize("raw", ["soon", "-1", "nan"])
def test_lifeline_setting_is_checked(raw: str) -> None:
    with pytest.raises(BadInput, match="BENCH_SLURM_LIFELINE_S"):
        lifeline_seconds({"BENCH_SLURM_LIFELINE_S": raw})
    assert lifeline_seconds({}) == 300 and lifeline_seconds({"BENCH_SLURM_LIFELINE_S": "0"}) == 0
