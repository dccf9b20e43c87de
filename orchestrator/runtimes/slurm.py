"""The slurm runtime: every run spec becomes one batch job on an existing Slurm cluster.

For each run bench writes a job script next to the spec in the job folder (the artifact's run
folder, or ``<shared_dir>/bench-<artifact id>/<run id>/`` when ``slurm.shared_dir`` is set: a
folder every node sees at the same path), submits it with ``sbatch --parsable``, follows it with
``squeue`` (one call for every job in flight, ``slurm_client.QueueWatch``) and ``scontrol show job``
(never ``sacct``: accounting may be off), streams
the job's output file into ``engine.log`` and the progress line, and returns when the job has
ended. A matrix's runs are all in flight at once (``max_in_flight``: no limit): the executor hands
every run over first (``submit``: each job submitted up front, in the matrix's order, capped by
``slurm.max_concurrent`` through job dependencies, its id written to the run folder's
``slurm-job.json``: ``slurm_batch``), then ``execute`` follows each run's job in its own thread. A run
that exceeds its measurement timeout once running, or is interrupted (Ctrl-C, SIGTERM: the executor's
stop request), is cancelled with ``scancel`` and waited for, so no job is left behind; a job that ends
CANCELLED (by someone else), PREEMPTED, NODE_FAIL, BOOT_FAIL, OUT_OF_MEMORY, TIMEOUT, or vanishes, is a
failure of its run naming the state. ``reattach`` lets ``bench scenario resume`` follow the jobs a
killed bench left queued or running (or ended with a result) instead of submitting them again.

Settings: :class:`orchestrator.runtimes.slurm_settings.SlurmSettings`. Beside this module, by job:
``slurm_client`` (the Slurm commands and the scheduler's view of a job), ``slurm_job`` (the job
script), ``slurm_follow`` (following a submitted job to its end, cancelling it).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from orchestrator import signals
from orchestrator.engines.registry import EngineInfo
from orchestrator.envvars import without_internal
from orchestrator.errors import BadInput
from orchestrator.runtimes.base import Execution, LineSink, PlannedRun, RunPaths, Runtime
from orchestrator.runtimes.engine_settings import RuntimeSettings
from orchestrator.runtimes.local import FIXED_ENV, LocalRuntime
from orchestrator.runtimes.runtime_facts import RuntimeFacts
from orchestrator.runtimes.slurm_batch import JOB_FILE, SubmittedJob, job_record, read_job_file, reattachable, sbatch, submit_all, write_job_file
from orchestrator.runtimes.slurm_client import check_controller, check_tools, command_message, exit_status, partitions, run_command
from orchestrator.runtimes.slurm_follow import JobFacts, LogTail, cancel, collect, follow, touch_lifeline
from orchestrator.runtimes.slurm_job import JobRequest, job_script, lifeline_path, lifeline_seconds, request_options
from orchestrator.runtimes.slurm_settings import SlurmSettings


def check_writable(folder: Path, what: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".bench-write-probe-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise BadInput(f"{what} {folder}: not writable ({exc.strerror or exc}); it must be a folder every node sees") from None


def pick_launcher(cfg: SlurmSettings) -> str:
    """pyxis or apptainer for container mode: the configured one, or the one found here."""
    if cfg.container != "auto":
        return cfg.container
    help_text = run_command(["srun", "--help"], timeout=30)
    if "--container-image" in (help_text.stdout + help_text.stderr):
        return "pyxis"
    if shutil.which("apptainer"):
        return "apptainer"
    raise BadInput("slurm.mode container: neither pyxis (srun --container-image) nor apptainer was found here; "
                   "set slurm.container to pyxis or apptainer if the compute nodes have it")


def image_for(engine: EngineInfo, settings: RuntimeSettings, cfg: SlurmSettings, launcher: str) -> str:
    """The image for container mode. Given ones (slurm.image, engines.<name>.image) go as they are;
    bench's own local tag (``bench image build``) is read from the node's Docker daemon."""
    given = cfg.image or settings.image
    if given:
        return given
    try:
        from orchestrator.imagebuild.metadata import get_image_meta

        tag = get_image_meta(engine.name).tag
    except Exception:  # no image metadata for this engine: bench's conventional tag
        tag = f"bench/{engine.name}:latest"
    return f"dockerd://{tag}" if launcher == "pyxis" else f"docker-daemon://{tag}"


def job_folder(paths: RunPaths, cfg: SlurmSettings) -> Path:
    """Where the job's files live: the run folder, or its mirror under the shared folder."""
    if cfg.shared_dir is None:
        return paths.run_dir
    artifact_id = paths.run_dir.parent.parent.name
    return cfg.shared_dir / f"bench-{artifact_id}" / paths.run_dir.name


def job_name(paths: RunPaths) -> str:
    """The run's job name, unique to the artifact and the run: ``bench-<artifact id>-<run id>``."""
    return f"bench-{paths.run_dir.parent.parent.name}-{paths.run_dir.name}"


class SlurmRuntime(Runtime):
    name = "slurm"
    in_flight_file = JOB_FILE

    def check(self, engine: EngineInfo, settings: RuntimeSettings) -> RuntimeFacts:
        cfg = settings.slurm
        check_tools()
        check_controller()
        known = partitions()
        if cfg.partition and cfg.partition not in known:
            raise BadInput(f"slurm.partition: unknown partition '{cfg.partition}' (the cluster has: {', '.join(sorted(known)) or 'none'})")
        if cfg.shared_dir is not None:
            check_writable(cfg.shared_dir, "slurm.shared_dir:")
        if cfg.mode == "local":
            info = RuntimeFacts(self.name, mode=cfg.mode, partition=cfg.partition, interpreter=LocalRuntime().check(engine, settings).interpreter)
        else:
            launcher = pick_launcher(cfg)
            info = RuntimeFacts(self.name, mode=cfg.mode, partition=cfg.partition, container_launcher=launcher,
                                image=image_for(engine, settings, cfg, launcher))
        # Let the controller judge the request (account, time syntax, GPUs, extra options) without submitting.
        asked = [*request_options(cfg.partition, cfg.account, cfg.time, cfg.gpus if isinstance(cfg.gpus, int) else 0), *cfg.sbatch_args]
        test = run_command(["sbatch", "--test-only", "--output=/dev/null", *asked], stdin="#!/bin/sh\ntrue\n")
        if test.returncode != 0:
            raise BadInput(f"--runtime slurm: the cluster refuses the job request ({' '.join(asked) or 'defaults'}): {command_message(test)}")
        return info

    def max_in_flight(self, settings: RuntimeSettings) -> int | None:
        """Every run of the matrix in flight at once: submitted up front, followed together; Slurm (and the
        ``slurm.max_concurrent`` cap, see ``slurm_batch``) decides how many run."""
        return None

    def submit(self, runs: Sequence[PlannedRun], sink: LineSink) -> int:
        return submit_all(runs, lambda run, dependency: self._submit(run, dependency, sink), sink)

    def reattach(self, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings) -> str | None:
        folder = job_folder(paths, settings.slurm)
        note = reattachable(paths, folder / "result.json" if folder != paths.run_dir else paths.result)
        if note is None:  # the run starts again: a job of it still queued (its id never recorded) must not race the new one
            run_command(["scancel", "--name", job_name(paths), "--user", str(os.getuid())], timeout=30)
        return note

    def execute(self, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings, timeout_s: float, sink: LineSink) -> Execution:
        cfg = settings.slurm
        base = RuntimeFacts(self.name, mode=cfg.mode)
        submitted = read_job_file(paths.run_dir)  # submitted up front, or by an earlier bench (resume reattaches)
        try:
            job, folder = self._prepare(engine, paths, settings, stage=submitted is None)
        except OSError as exc:
            return Execution("error", None, f"cannot write the job files: {exc.strerror or exc}", base)
        except BadInput as exc:
            return Execution("error", None, str(exc), base)
        info = self._facts(base, job, cfg)
        if submitted is None and signals.stopping():  # never submitted, and the scenario is stopping
            lifeline_path(job).unlink(missing_ok=True)
            return Execution("interrupted", None, f"{signals.interrupt_reason()}; not submitted", info.facts())
        if submitted is None:
            failed = self._write_script(job, folder, paths, cfg, info)
            if failed is not None:
                return failed
        tail = LogTail(job.output, paths.log, sink)
        job_id: str | None = submitted.job_id if submitted else None
        finished = False
        try:
            if job_id is None:
                job_id, why = sbatch(folder / "slurm-job.sh", folder, cfg, None)
                if job_id is None:
                    finished = True
                    return Execution("error", None, why, info.facts())
                sink(f"slurm: submitted job {job_id}" + (f" to partition {cfg.partition}" if cfg.partition else ""))
            info.job_id = job_id
            execution = follow(job_id, job, paths, cfg, timeout_s, sink, info, tail)
            finished = True
            return execution
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP (orchestrator.signals), or a stop request
            sink("slurm: interrupted; cancelling " + (f"job {job_id}" if job_id else f"jobs named {job.job_name}"))
            view = cancel(job_id, job.job_name, info)
            finished = True
            collect(job, paths, tail)
            return Execution("interrupted", exit_status(view.exit_code or ""), f"{signals.interrupt_reason(exc)}; "
                             + (f"Slurm job {job_id} cancelled" if job_id else "submission cancelled"), info.facts())
        finally:
            if not finished:  # an unexpected error: never leave the job behind
                cancel(job_id, job.job_name, info)

    # -- the steps of one run ---------------------------------------------------------------------

    def _submit(self, run: PlannedRun, dependency: str | None, sink: LineSink) -> SubmittedJob | None:
        """Stage and submit one run up front; its job recorded in its folder (None: refused, ``execute`` says why)."""
        cfg = run.settings.slurm
        try:
            job, folder = self._prepare(run.engine, run.paths, run.settings, stage=True)
        except (OSError, BadInput):
            return None  # execute() meets the same problem and records it
        info = self._facts(RuntimeFacts(self.name, mode=cfg.mode), job, cfg)
        if self._write_script(job, folder, run.paths, cfg, info) is not None:
            return None
        job_id: str | None = None
        try:
            job_id, why = sbatch(folder / "slurm-job.sh", folder, cfg, dependency)
            if job_id is None:
                lifeline_path(job).unlink(missing_ok=True)  # execute() submits it again, or records why not
                sink(f"slurm: {run.paths.run_dir.name}: {why}")
                return None
            submitted = job_record(run.paths.run_dir.name, job_id, job.job_name, dependency)
            write_job_file(run.paths.run_dir, submitted)
            sink(f"slurm: submitted job {job_id} for {run.paths.run_dir.name}" + (f" ({dependency})" if dependency else ""))
            return submitted
        except KeyboardInterrupt:  # not handed over: its job (by id, or by the run's unique name) must not outlive bench
            cancel(job_id, job.job_name, info)
            lifeline_path(job).unlink(missing_ok=True)
            raise

    @staticmethod
    def _facts(base: RuntimeFacts, job: JobRequest, cfg: SlurmSettings) -> JobFacts:
        return JobFacts(replace(base, interpreter=job.interpreter or None, image=job.image or None, partition=cfg.partition,
                                gpus=job.gpus or None))

    @staticmethod
    def _write_script(job: JobRequest, folder: Path, paths: RunPaths, cfg: SlurmSettings, info: JobFacts) -> Execution | None:
        """The job script (and a fresh lifeline) in the job folder; an error Execution when it cannot be written."""
        script = folder / "slurm-job.sh"
        try:
            script.write_text(job_script(job, cfg.sbatch_args))
            script.chmod(0o755)
            touch_lifeline(job)  # fresh before the job can start
            if folder != paths.run_dir:  # the script as submitted, kept with the run's record
                shutil.copyfile(script, paths.run_dir / "slurm-job.sh")
        except OSError as exc:
            return Execution("error", None, f"cannot write the job script {script}: {exc.strerror or exc}", info.facts())
        except BadInput as exc:  # a value that cannot be carried safely by the script: nothing is submitted
            return Execution("error", None, f"job script refused: {exc}", info.facts())
        return None

    def _prepare(self, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings, stage: bool) -> tuple[JobRequest, Path]:
        """The job of the run and its folder; ``stage``: copy the spec to the shared folder (a job to submit now)."""
        cfg = settings.slurm
        checked = settings.checked or RuntimeFacts(self.name)
        folder = job_folder(paths, cfg)
        if folder != paths.run_dir:
            if stage:
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(paths.spec, folder / "spec.json")
                for stale in ("result.json", "job.out"):
                    (folder / stale).unlink(missing_ok=True)
            spec, result, output = folder / "spec.json", folder / "result.json", folder / "job.out"
        else:
            spec, result, output = paths.spec, paths.result, paths.log
        spec_doc = json.loads(paths.spec.read_text())
        env = {**without_internal(settings.local.environment()), **FIXED_ENV}  # NVLink multicast stays off
        artifact_id = paths.run_dir.parent.parent.name
        job = JobRequest(
            job_name=job_name(paths), workdir=folder, output=output, spec=spec, result=result,
            dataset=paths.dataset, module=engine.module, mode=cfg.mode, partition=cfg.partition, account=cfg.account,
            time=cfg.time, gpus=self._gpus(cfg, spec_doc.get("device", "auto"), int((spec_doc.get("parity") or {}).get("devices", 1))), env=env,
            comment=f"run {paths.run_dir.name} of artifact {artifact_id} (engine {engine.name}, mode {cfg.mode})",
            lifeline_s=lifeline_seconds(),
        )
        if cfg.mode == "local":
            job.interpreter = checked.interpreter or LocalRuntime().check(engine, settings).interpreter
            job.python_path = engine.python_path()
        else:
            job.launcher = checked.container_launcher or pick_launcher(cfg)
            job.image = checked.image or image_for(engine, settings, cfg, job.launcher)
        return job, folder

    @staticmethod
    def _gpus(cfg: SlurmSettings, device: str, devices: int) -> int:
        """GPUs to ask for: the setting, else for a run on cuda (or auto on a GPU partition) its device count."""
        if isinstance(cfg.gpus, int):
            return cfg.gpus
        if device == "cpu":
            return 0
        if device == "cuda":
            return devices
        known = partitions()
        gres = known.get(cfg.partition, "") if cfg.partition else ",".join(known.values())
        return devices if "gpu" in gres else 0


RUNTIME = SlurmRuntime
