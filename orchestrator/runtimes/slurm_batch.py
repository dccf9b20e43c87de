"""A matrix's jobs submitted up front: every run's job handed to ``sbatch`` before the first one is followed,
in the executor's order (repeats outermost, engines alternating: ``scenario.matrix.expand``), so that Slurm
starts them in that order as slots free up. Each job's id goes into its run folder at once
(``slurm-job.json``, schema ``slurm-job``), where ``execute`` finds the job to follow and where a later
``bench scenario resume`` finds it to reattach to (:func:`reattachable`).

The cap (``slurm.max_concurrent`` N): job k of the order is submitted with ``--dependency=afterany:<job k-N>``,
so the jobs form N chains and at most N of them run at once, whatever each one asks for; Slurm, not bench,
holds the rest (bench can die and the cap still holds). Without a cap no dependency is set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator import signals
from orchestrator.clock import utc_now
from orchestrator.jsonio import write_json
from orchestrator.runtimes.base import LineSink, PlannedRun, RunPaths
from orchestrator.runtimes.slurm_client import PENDING, command_message, query_job, run_command
from orchestrator.runtimes.slurm_settings import SlurmSettings
from orchestrator.schemas import SchemaError, validate

JOB_FILE = "slurm-job.json"
FOLLOWABLE = PENDING | {"RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT", "RESIZING"}


@dataclass(frozen=True)
class SubmittedJob:
    """The job of one run, as ``slurm-job.json`` records it."""

    run_id: str
    job_id: str
    job_name: str
    submitted_at: str
    dependency: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"schema_version": 1, "run_id": self.run_id, "job_id": self.job_id, "job_name": self.job_name,
                "submitted_at": self.submitted_at, "dependency": self.dependency}


def write_job_file(run_dir: Path, job: SubmittedJob) -> None:
    write_json(run_dir / JOB_FILE, job.to_json(), "slurm-job")


def read_job_file(run_dir: Path) -> SubmittedJob | None:
    """The run's submitted job, when its folder has a valid ``slurm-job.json`` (else None)."""
    try:
        document = json.loads((run_dir / JOB_FILE).read_text())
        validate(document, "slurm-job")
    except (OSError, ValueError, SchemaError):
        return None
    return SubmittedJob(document["run_id"], document["job_id"], document["job_name"], document["submitted_at"], document.get("dependency"))


def sbatch(script: Path, folder: Path, cfg: SlurmSettings, dependency: str | None) -> tuple[str | None, str]:
    """Submit ``script``: (job id, '') or (None, why not). A dependency on a job the controller forgot is dropped."""
    extra = [f"--dependency={dependency}"] if dependency else []
    proc = run_command(["sbatch", "--parsable", *extra, *cfg.sbatch_args, str(script)], cwd=folder)
    if proc.returncode != 0 and dependency and "dependency" in command_message(proc).lower():
        proc = run_command(["sbatch", "--parsable", *cfg.sbatch_args, str(script)], cwd=folder)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None, f"sbatch failed: {command_message(proc)}"
    return proc.stdout.strip().splitlines()[-1].split(";")[0].strip(), ""


# (run, its dependency) -> the submitted job, or None when sbatch refused it (the run's execute reports why)
Submitter = Callable[[PlannedRun, str | None], SubmittedJob | None]


def submit_all(runs: Sequence[PlannedRun], submit_one: Submitter, sink: LineSink) -> int:
    """Submit the runs in order (``resumed`` ones are in flight already: only counted in the chains);
    returns how many were handed over (fewer on KeyboardInterrupt, after ``signals.request_stop()``)."""
    chain: list[str | None] = []  # the job of each run in order (None: not submitted)
    for index, run in enumerate(runs):
        cap = run.settings.slurm.max_concurrent
        before = chain[index - cap] if cap and index >= cap else None
        try:
            if run.resumed:
                found = read_job_file(run.paths.run_dir)
                chain.append(found.job_id if found else None)
                continue
            job = submit_one(run, f"afterany:{before}" if before else None)
        except KeyboardInterrupt:
            signals.request_stop()
            sink(f"slurm: interrupted while submitting; {len(runs) - index} run(s) not submitted")
            return index
        chain.append(job.job_id if job else None)
    return len(runs)


def reattachable(paths: RunPaths, result: Path) -> str | None:
    """Whether an earlier bench's job of this run can be followed again: still queued or running, or ended
    COMPLETED with a result (``result``: where the job writes it) whose status is ok; known to the controller under
    the run's job name. A note, or None."""
    job = read_job_file(paths.run_dir)
    if job is None:
        return None
    view = query_job(job.job_id)
    if not view.known or view.state == "GONE" or (view.name is not None and view.name != job.job_name):
        return None
    if view.state in FOLLOWABLE:
        return f"Slurm job {job.job_id} still {view.state.lower()}: reattached"
    if view.state == "COMPLETED" and _ok_result(result):
        return f"Slurm job {job.job_id} ended COMPLETED while bench was away: its result is collected"
    return None


def _ok_result(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("status") == "ok"
    except (OSError, ValueError, AttributeError):
        return False


def job_record(run_id: str, job_id: str, job_name: str, dependency: str | None) -> SubmittedJob:
    return SubmittedJob(run_id, job_id, job_name, utc_now(), dependency)
