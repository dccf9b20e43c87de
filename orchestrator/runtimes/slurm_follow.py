"""Following a submitted Slurm job until it has ended: its state polled (``slurm_client.query_job``),
its output streamed into ``engine.log`` and the progress line (:class:`LogTail`), bench's lifeline
touched, the run's timeout enforced with ``scancel``, the result brought home from the shared folder.
Each step returns the run's :class:`~orchestrator.runtimes.base.Execution`."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator import signals
from orchestrator.runtimes.base import Execution, LineSink, RunPaths
from orchestrator.runtimes.runtime_facts import RuntimeFacts
from orchestrator.runtimes.slurm_client import PENDING, TERMINAL, WATCH, JobView, exit_status, in_queue, node_type, query_job, run_command
from orchestrator.runtimes.slurm_job import JobRequest, lifeline_path
from orchestrator.runtimes.slurm_settings import SlurmSettings

CANCEL_WAIT_S = 90.0  # after scancel: how long to wait for the job to leave the queue
LOST_AFTER_S = 120.0  # the controller not answering about the job this long: give up on it
PENDING_NOTE_S = 30.0  # repeat the "pending" progress line this often


@dataclass
class JobFacts:
    """What bench learns of one Slurm job as it follows it, step by step, over the run's facts (``base``)."""

    base: RuntimeFacts
    job_id: str | None = None
    node: str | None = None
    pending_s: float | None = None
    run_s: float | None = None
    scheduler_state: str | None = None
    exit_code: str | None = None
    job_start: str | None = None
    job_end: str | None = None

    def seen(self, view: JobView) -> None:
        """Keep what the scheduler's ``view`` of the job knows (node, exit code, start and end times)."""
        self.node = view.node or self.node
        self.exit_code = view.exit_code or self.exit_code
        self.job_start = view.start or self.job_start
        self.job_end = view.end or self.job_end

    def facts(self) -> RuntimeFacts:
        """The run's facts with the job's."""
        return replace(self.base, job_id=self.job_id, node=self.node, pending_s=self.pending_s, run_s=self.run_s,
                       scheduler_state=self.scheduler_state, exit_code=self.exit_code, job_start=self.job_start,
                       job_end=self.job_end, node_type=node_type(self.node) if self.node else None)


class LogTail:
    """Follow the job's output file: new complete lines go to the sink (and to engine.log)."""

    def __init__(self, source: Path, log: Path, sink: LineSink):
        self.source, self.log, self.sink = source, log, sink
        self.offset = 0
        self.partial = b""
        self.copy = source.resolve() != log.resolve()

    def poll(self, final: bool = False) -> None:
        try:
            with open(self.source, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = b"" if final else lines.pop()
        if self.copy and (lines or final):
            chunk = b"\n".join(lines) + (b"\n" if lines and lines[-1] != b"" else b"")
            with open(self.log, "ab") as log:
                log.write(chunk)
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if line or not final:
                self.sink(line)


def touch_lifeline(job: JobRequest) -> None:
    """Tell the job that bench still follows it (see ``slurm_job._watched_engine``)."""
    if job.lifeline_s <= 0:
        return
    try:
        lifeline_path(job).touch()
    except OSError:
        pass  # a full or read-only shared folder: the job's own --time limit still bounds it


def follow(job_id: str, job: JobRequest, paths: RunPaths, cfg: SlurmSettings, timeout_s: float,
           sink: LineSink, info: JobFacts, tail: LogTail) -> Execution:
    """Poll the job until it has ended (or exceeded ``timeout_s`` once running: cancelled), streaming its output."""
    try:
        return _follow(job_id, job, paths, cfg, timeout_s, sink, info, tail)
    finally:
        WATCH.forget(job_id)


def _follow(job_id: str, job: JobRequest, paths: RunPaths, cfg: SlurmSettings, timeout_s: float,
            sink: LineSink, info: JobFacts, tail: LogTail) -> Execution:
    submitted = time.monotonic()
    running_since: float | None = None
    last_state, last_note, last_answer = "", 0.0, time.monotonic()
    while True:
        if signals.stopping():  # Ctrl-C/SIGTERM seen by the main thread while this one follows a job
            raise KeyboardInterrupt
        touch_lifeline(job)
        view = WATCH.view(job_id, cfg.poll_s / 2) or query_job(job_id)
        now = time.monotonic()
        if view.known:
            last_answer = now
        elif now - last_answer > LOST_AFTER_S:
            cancel(job_id, job.job_name, info)
            collect(job, paths, tail)
            return Execution("error", None, f"lost track of Slurm job {job_id}: the controller did not answer for {LOST_AFTER_S:g} s; "
                             "job cancelled", info.facts())
        if view.node:
            info.node = view.node
        state = view.state
        if state in ("RUNNING", "COMPLETING") and running_since is None:
            running_since = now
            info.pending_s = round(now - submitted, 3)
        if state != last_state or (state in PENDING and now - last_note >= PENDING_NOTE_S):
            if state in PENDING:
                sink(f"slurm: job {job_id} {state.lower()}" + (f" ({view.reason})" if view.reason and view.reason != "None" else "")
                     + f", {now - submitted:.0f} s in the queue")
            elif state == "RUNNING":
                sink(f"slurm: job {job_id} running on {view.node or '?'}")
            last_state, last_note = state, now
        tail.poll()
        if state in TERMINAL or state == "GONE":
            if running_since is not None:
                info.run_s = round(now - running_since, 3)
            return ended(job_id, view, job, paths, tail, info, sink)
        if running_since is not None and now - running_since >= timeout_s:
            sink(f"slurm: job {job_id} exceeded the {timeout_s:g} s timeout; cancelling")
            view = cancel(job_id, job.job_name, info)
            collect(job, paths, tail)
            info.run_s = round(now - running_since, 3)
            return Execution("timeout", exit_status(view.exit_code or ""),
                             f"exceeded the {timeout_s:g} s timeout; Slurm job {job_id} cancelled", info.facts())
        signals.pause(cfg.poll_s)

def ended(job_id: str, view: JobView, job: JobRequest, paths: RunPaths, tail: LogTail,
          info: JobFacts, sink: LineSink) -> Execution:
    """The run's execution once its job has ended: exited (COMPLETED, FAILED: the engine's result decides),
    timeout (TIMEOUT), else a failure naming the state (CANCELLED by someone else, PREEMPTED, NODE_FAIL,
    BOOT_FAIL, OUT_OF_MEMORY, DEADLINE, or gone from the controller without a result)."""
    # Wait out COMPLETING (epilog, output flush) so the log and the result are whole.
    deadline = time.monotonic() + CANCEL_WAIT_S
    while in_queue(job_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    final = query_job(job_id)
    if final.state in TERMINAL:
        view = final
    info.scheduler_state = view.state if view.state != "GONE" else "UNKNOWN"
    info.seen(view)
    collect(job, paths, tail, wait_for_result=view.state == "COMPLETED")
    code = exit_status(view.exit_code or "")
    sink(f"slurm: job {job_id} ended {view.state}" + (f" (exit code {view.exit_code})" if view.exit_code else ""))
    has_result = paths.result.is_file()
    if view.state == "TIMEOUT":
        limit = f" (--time={job.time})" if job.time else ""
        return Execution("timeout", code, f"Slurm job {job_id} ended TIMEOUT: it reached its time limit{limit}", info.facts())
    if view.state in ("COMPLETED", "FAILED") or (view.state == "GONE" and has_result):
        return Execution("exited", code if code is not None else (0 if has_result else None), None, info.facts())
    reason = f" ({view.reason})" if view.reason and view.reason != "None" else ""
    what = "vanished from the controller (neither scontrol nor squeue knows it)" if view.state == "GONE" else f"ended {view.state}"
    return Execution("error", code, f"Slurm job {job_id} {what}{reason}" + ("" if has_result else " without an engine result"),
                     info.facts())

def collect(job: JobRequest, paths: RunPaths, tail: LogTail, wait_for_result: bool = False) -> None:
    """Final log lines; the result copied back from the shared folder (NFS may lag a little)."""
    lifeline_path(job).unlink(missing_ok=True)  # the job has ended: nothing is left to keep alive
    deadline = time.monotonic() + (10.0 if wait_for_result else 0.0)
    while not job.result.is_file() and time.monotonic() < deadline:
        time.sleep(0.5)
    tail.poll(final=True)
    if job.workdir != paths.run_dir:  # the staging copy: bring the result home, then drop it
        if job.result.is_file():
            shutil.copyfile(job.result, paths.result)
        shutil.rmtree(job.workdir, ignore_errors=True)

def cancel(job_id: str | None, job_name: str, info: JobFacts) -> JobView:
    """scancel the job (by id, or by its unique name when sbatch was interrupted) and wait until it has left the queue."""
    if job_id is None:
        run_command(["scancel", "--name", job_name, "--user", str(os.getuid())], timeout=30)
        return JobView()
    run_command(["scancel", job_id], timeout=30)
    deadline = time.monotonic() + CANCEL_WAIT_S
    try:
        while in_queue(job_id) and time.monotonic() < deadline:
            time.sleep(0.5)
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, the cancel request is in
        pass
    view = query_job(job_id)
    info.scheduler_state = view.state if view.state not in ("GONE", "UNKNOWN") else "CANCELLED"
    info.seen(view)
    return view
