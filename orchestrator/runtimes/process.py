"""Run a child process with streamed output, a timeout and clean interruption; every process it
starts ends with it (orchestrator.runtimes.process_guard)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from orchestrator import signals
from orchestrator.runtimes import process_guard
from orchestrator.runtimes.base import Execution, LineSink

GRACE_S = 10.0


def _pump(stream, log_path: Path, sink: LineSink) -> None:
    with open(log_path, "a", encoding="utf-8", errors="replace") as log:
        for line in iter(stream.readline, ""):
            log.write(line)
            log.flush()
            sink(line.rstrip("\n"))
    stream.close()


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the child's process group, then SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_streamed(argv: Sequence[str], env: dict[str, str], cwd: Path, log_path: Path, timeout_s: float,
                 sink: LineSink) -> Execution:
    """Run ``argv`` in its own session; on timeout or Ctrl-C stop its whole process group. However it
    ends, every process it started is ended with it (its guard: the session, the group, descendants
    and orphans), also when bench is SIGKILLed."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process_guard.become_subreaper()  # orphans of the run are re-parented to bench, not to PID 1
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True,
        )
    except OSError as exc:
        return Execution("error", None, f"cannot start {argv[0]}: {exc.strerror or exc}")
    guard = process_guard.start(proc.pid)
    reader = threading.Thread(target=_pump, args=(proc.stdout, log_path, sink), daemon=True)
    reader.start()
    try:
        execution = _supervise(proc, timeout_s)
    finally:
        process_guard.finish(guard)  # before the output is drained: a child may hold the engine's stdout
        reader.join(timeout=5)
    return execution


def _supervise(proc: subprocess.Popen[str], timeout_s: float) -> Execution:
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                code = proc.wait(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
                return Execution("exited", code)
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    _stop(proc)
                    return Execution("timeout", proc.returncode, f"exceeded the {timeout_s:g} s timeout; stopped")
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP (orchestrator.signals)
        _stop(proc)
        return Execution("interrupted", proc.returncode, signals.interrupt_reason(exc))
