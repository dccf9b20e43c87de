"""The slurm runtime: every run spec becomes one batch job on an existing Slurm cluster.

For each run bench writes a job script next to the spec in the job folder (the artifact's run
folder, or ``<shared_dir>/bench-<artifact id>/<run id>/`` when ``slurm.shared_dir`` is set: a
folder every node sees at the same path), submits it with ``sbatch --parsable``, follows it with
``scontrol show job`` (``squeue`` as the fallback; never ``sacct``: accounting may be off), streams
the job's output file into ``engine.log`` and the progress line, and returns when the job has
ended. Jobs run one at a time (the executor runs plans in order). A run that exceeds its
measurement timeout once running, or is interrupted (Ctrl-C), is cancelled with ``scancel`` and
waited for, so no job is left behind.

Settings: :class:`orchestrator.runtimes.slurm_settings.SlurmSettings`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import signals
from orchestrator.engines.registry import EngineInfo
from orchestrator.envvars import without_internal
from orchestrator.errors import BadInput
from orchestrator.runtimes.base import Execution, LineSink, RunPaths, Runtime
from orchestrator.runtimes.local import FIXED_ENV, LocalRuntime
from orchestrator.runtimes.slurm_job import JobRequest, job_script, lifeline_path, lifeline_seconds, request_options
from orchestrator.runtimes.slurm_settings import SlurmSettings, slurm_settings

TOOLS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
COMMAND_TIMEOUT_S = 60.0
# Job states after which nothing more will happen to the job (it may still be COMPLETING).
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED"}
CANCEL_WAIT_S = 90.0  # after scancel: how long to wait for the job to leave the queue
LOST_AFTER_S = 120.0  # the controller not answering about the job this long: give up on it
PENDING_NOTE_S = 30.0  # repeat the "pending" progress line this often


def _run(argv: list[str], timeout: float = COMMAND_TIMEOUT_S, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client command; OSError/timeouts come back as a failed CompletedProcess."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin, cwd=cwd,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]}: no answer within {timeout:g} s")
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: {exc.strerror or exc}")


def _message(proc: subprocess.CompletedProcess[str]) -> str:
    text = " ".join(line.strip() for line in (proc.stderr or proc.stdout or "").strip().splitlines() if line.strip())
    return text or f"exit code {proc.returncode}"


def check_tools() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise BadInput(f"--runtime slurm: Slurm command{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found on PATH "
                       "(run bench where the Slurm client commands are installed, e.g. a login node)")


def check_controller() -> None:
    proc = _run(["scontrol", "ping"], timeout=30)
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or "DOWN" in text or " UP" not in text:
        raise BadInput(f"--runtime slurm: the Slurm controller is unreachable ({_message(proc) if proc.returncode else text})")


def partitions() -> dict[str, str]:
    """Partition name -> its generic resources (e.g. 'gpu:8' or '(null)')."""
    proc = _run(["sinfo", "-h", "-o", "%R|%G"])
    if proc.returncode != 0:
        raise BadInput(f"--runtime slurm: sinfo failed: {_message(proc)}")
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        name, _, gres = line.strip().partition("|")
        if name:
            found[name] = (found.get(name, "") + "," + gres).strip(",")
    return found


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
    help_text = _run(["srun", "--help"], timeout=30)
    if "--container-image" in (help_text.stdout + help_text.stderr):
        return "pyxis"
    if shutil.which("apptainer"):
        return "apptainer"
    raise BadInput("slurm.mode container: neither pyxis (srun --container-image) nor apptainer was found here; "
                   "set slurm.container to pyxis or apptainer if the compute nodes have it")


def image_for(engine: EngineInfo, settings: dict[str, Any], cfg: SlurmSettings, launcher: str) -> str:
    """The image for container mode. Given ones (slurm.image, engines.<name>.image) go as they are;
    bench's own local tag (``bench image build``) is read from the node's Docker daemon."""
    given = cfg.image or settings.get("image")
    if given:
        return str(given)
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


def parse_job(text: str) -> dict[str, str]:
    """``scontrol show job -o`` output -> {key: value} (values without spaces are enough here)."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z][\w:/]*)=(\S*)", text))


def exit_status(exit_code: str) -> int | None:
    """Slurm's 'code:signal' -> a shell-style exit status (128+signal when killed)."""
    match = re.fullmatch(r"(\d+):(\d+)", exit_code or "")
    if not match:
        return None
    code, sig = int(match.group(1)), int(match.group(2))
    return 128 + sig if sig else code


@dataclass
class JobView:
    state: str = "UNKNOWN"
    node: str | None = None
    reason: str | None = None
    exit_code: str | None = None
    known: bool = False  # the controller answered about the job


def query_job(job_id: str) -> JobView:
    """The scheduler's view of a job: scontrol first, squeue when scontrol has nothing."""
    proc = _run(["scontrol", "show", "job", "-o", job_id], timeout=30)
    if proc.returncode == 0 and "JobState=" in proc.stdout:
        fields = parse_job(proc.stdout)
        node = fields.get("BatchHost") or fields.get("NodeList") or None
        state = fields.get("JobState", "UNKNOWN")
        return JobView(state, node if node and node != "(null)" else None, fields.get("Reason"), fields.get("ExitCode"), True)
    queue = _run(["squeue", "-h", "-j", job_id, "-o", "%T|%N|%r"], timeout=30)
    if queue.returncode == 0 and queue.stdout.strip():
        state, node, reason = ([*queue.stdout.strip().splitlines()[0].split("|"), "", ""])[:3]
        return JobView(state or "UNKNOWN", node or None, reason or None, None, True)
    if "Invalid job id" in (proc.stderr + queue.stderr) or (queue.returncode == 0 and not queue.stdout.strip() and proc.returncode != 0):
        return JobView("GONE", known=True)  # purged from the controller: it ended long ago
    return JobView()


def in_queue(job_id: str) -> bool:
    proc = _run(["squeue", "-h", "-j", job_id, "-o", "%T"], timeout=30)
    return proc.returncode == 0 and bool(proc.stdout.strip())


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


class SlurmRuntime(Runtime):
    name = "slurm"

    def check(self, engine: EngineInfo, settings: dict[str, Any]) -> dict[str, Any]:
        cfg = slurm_settings(settings)
        check_tools()
        check_controller()
        known = partitions()
        if cfg.partition and cfg.partition not in known:
            raise BadInput(f"slurm.partition: unknown partition '{cfg.partition}' (the cluster has: {', '.join(sorted(known)) or 'none'})")
        if cfg.shared_dir is not None:
            check_writable(cfg.shared_dir, "slurm.shared_dir:")
        info: dict[str, Any] = {"name": self.name, "mode": cfg.mode}
        if cfg.partition:
            info["partition"] = cfg.partition
        if cfg.mode == "local":
            info["interpreter"] = LocalRuntime().check(engine, settings)["interpreter"]
        else:
            info["container_launcher"] = pick_launcher(cfg)
            info["image"] = image_for(engine, settings, cfg, info["container_launcher"])
        # Let the controller judge the request (account, time syntax, GPUs, extra options) without submitting.
        asked = [*request_options(cfg.partition, cfg.account, cfg.time, cfg.gpus if isinstance(cfg.gpus, int) else 0), *cfg.sbatch_args]
        test = _run(["sbatch", "--test-only", "--output=/dev/null", *asked], stdin="#!/bin/sh\ntrue\n")
        if test.returncode != 0:
            raise BadInput(f"--runtime slurm: the cluster refuses the job request ({' '.join(asked) or 'defaults'}): {_message(test)}")
        return info

    def execute(self, engine: EngineInfo, paths: RunPaths, settings: dict[str, Any], timeout_s: float, sink: LineSink) -> Execution:
        cfg = slurm_settings(settings)
        checked = settings.get("checked") or {}
        info: dict[str, Any] = {"name": self.name, "mode": cfg.mode}
        try:
            job, folder = self._prepare(engine, paths, settings, cfg, checked)
        except OSError as exc:
            return Execution("error", None, f"cannot write the job files: {exc.strerror or exc}", info)
        except BadInput as exc:
            return Execution("error", None, str(exc), info)
        info.update({k: v for k, v in (("interpreter", job.interpreter), ("image", job.image), ("partition", cfg.partition)) if v})
        if job.gpus:
            info["gpus"] = job.gpus
        script = folder / "slurm-job.sh"
        try:
            script.write_text(job_script(job, cfg.sbatch_args))
            script.chmod(0o755)
            touch_lifeline(job)  # fresh before the job can start
            if folder != paths.run_dir:  # the script as submitted, kept with the run's record
                shutil.copyfile(script, paths.run_dir / "slurm-job.sh")
        except OSError as exc:
            return Execution("error", None, f"cannot write the job script {script}: {exc.strerror or exc}", info)
        except BadInput as exc:  # a value that cannot be carried safely by the script: nothing is submitted
            return Execution("error", None, f"job script refused: {exc}", info)
        tail = LogTail(job.output, paths.log, sink)
        job_id: str | None = None
        finished = False
        try:
            proc = _run(["sbatch", "--parsable", *cfg.sbatch_args, str(script)], cwd=folder)
            if proc.returncode != 0 or not proc.stdout.strip():
                finished = True
                return Execution("error", None, f"sbatch failed: {_message(proc)}", info)
            job_id = proc.stdout.strip().splitlines()[-1].split(";")[0].strip()
            info["job_id"] = job_id
            sink(f"slurm: submitted job {job_id}" + (f" to partition {cfg.partition}" if cfg.partition else ""))
            execution = self._follow(job_id, job, paths, cfg, timeout_s, sink, info, tail)
            finished = True
            return execution
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP (orchestrator.signals)
            sink("slurm: interrupted; cancelling " + (f"job {job_id}" if job_id else f"jobs named {job.job_name}"))
            view = self._cancel(job_id, job.job_name, info)
            finished = True
            self._collect(job, paths, tail)
            return Execution("interrupted", exit_status(view.exit_code or ""), f"{signals.interrupt_reason(exc)}; "
                             + (f"Slurm job {job_id} cancelled" if job_id else "submission cancelled"), info)
        finally:
            if not finished:  # an unexpected error: never leave the job behind
                self._cancel(job_id, job.job_name, info)

    # -- the steps of one run ---------------------------------------------------------------------

    def _prepare(self, engine: EngineInfo, paths: RunPaths, settings: dict[str, Any], cfg: SlurmSettings,
                 checked: dict[str, Any]) -> tuple[JobRequest, Path]:
        folder = job_folder(paths, cfg)
        if folder != paths.run_dir:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(paths.spec, folder / "spec.json")
            for stale in ("result.json", "job.out"):
                (folder / stale).unlink(missing_ok=True)
            spec, result, output = folder / "spec.json", folder / "result.json", folder / "job.out"
        else:
            spec, result, output = paths.spec, paths.result, paths.log
        spec_doc = json.loads(paths.spec.read_text())
        env = {**without_internal({str(k): str(v) for k, v in (settings.get("env") or {}).items()}), **FIXED_ENV}  # NVLink multicast stays off
        artifact_id = paths.run_dir.parent.parent.name
        job = JobRequest(
            job_name=f"bench-{artifact_id}-{paths.run_dir.name}", workdir=folder, output=output, spec=spec, result=result,
            dataset=paths.dataset, module=engine.module, mode=cfg.mode, partition=cfg.partition, account=cfg.account,
            time=cfg.time, gpus=self._gpus(cfg, spec_doc), env=env,
            comment=f"run {paths.run_dir.name} of artifact {artifact_id} (engine {engine.name}, mode {cfg.mode})",
            lifeline_s=lifeline_seconds(),
        )
        if cfg.mode == "local":
            job.interpreter = settings.get("resolved_interpreter") or checked.get("interpreter") or LocalRuntime().check(engine, settings)["interpreter"]
            job.python_path = engine.python_path()
        else:
            job.launcher = checked.get("container_launcher") or pick_launcher(cfg)
            job.image = checked.get("image") or image_for(engine, settings, cfg, job.launcher)
        return job, folder

    @staticmethod
    def _gpus(cfg: SlurmSettings, spec: dict[str, Any]) -> int:
        if isinstance(cfg.gpus, int):
            return cfg.gpus
        device, devices = spec.get("device", "auto"), int(spec["parity"].get("devices", 1))
        if device == "cpu":
            return 0
        if device == "cuda":
            return devices
        known = partitions()
        gres = known.get(cfg.partition, "") if cfg.partition else ",".join(known.values())
        return devices if "gpu" in gres else 0

    def _follow(self, job_id: str, job: JobRequest, paths: RunPaths, cfg: SlurmSettings, timeout_s: float,
                sink: LineSink, info: dict[str, Any], tail: LogTail) -> Execution:
        submitted = time.monotonic()
        running_since: float | None = None
        last_state, last_note, last_answer = "", 0.0, time.monotonic()
        while True:
            touch_lifeline(job)
            view = query_job(job_id)
            now = time.monotonic()
            if view.known:
                last_answer = now
            elif now - last_answer > LOST_AFTER_S:
                self._cancel(job_id, job.job_name, info)
                self._collect(job, paths, tail)
                return Execution("error", None, f"lost track of Slurm job {job_id}: the controller did not answer for {LOST_AFTER_S:g} s; job cancelled", info)
            if view.node:
                info["node"] = view.node
            state = view.state
            if state in ("RUNNING", "COMPLETING") and running_since is None:
                running_since = now
                info["pending_s"] = round(now - submitted, 3)
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
                    info["run_s"] = round(now - running_since, 3)
                return self._ended(job_id, view, job, paths, tail, info, sink)
            if running_since is not None and now - running_since >= timeout_s:
                sink(f"slurm: job {job_id} exceeded the {timeout_s:g} s timeout; cancelling")
                view = self._cancel(job_id, job.job_name, info)
                self._collect(job, paths, tail)
                info["run_s"] = round(now - running_since, 3)
                return Execution("timeout", exit_status(view.exit_code or ""),
                                 f"exceeded the {timeout_s:g} s timeout; Slurm job {job_id} cancelled", info)
            time.sleep(cfg.poll_s)

    def _ended(self, job_id: str, view: JobView, job: JobRequest, paths: RunPaths, tail: LogTail,
               info: dict[str, Any], sink: LineSink) -> Execution:
        # Wait out COMPLETING (epilog, output flush) so the log and the result are whole.
        deadline = time.monotonic() + CANCEL_WAIT_S
        while in_queue(job_id) and time.monotonic() < deadline:
            time.sleep(0.5)
        final = query_job(job_id)
        if final.state in TERMINAL:
            view = final
        info["scheduler_state"] = view.state if view.state != "GONE" else "UNKNOWN"
        if view.exit_code:
            info["exit_code"] = view.exit_code
        if view.node:
            info["node"] = view.node
        self._collect(job, paths, tail, wait_for_result=view.state == "COMPLETED")
        code = exit_status(view.exit_code or "")
        sink(f"slurm: job {job_id} ended {view.state}" + (f" (exit code {view.exit_code})" if view.exit_code else ""))
        has_result = paths.result.is_file()
        if view.state == "TIMEOUT":
            return Execution("timeout", code, f"Slurm job {job_id} reached its time limit" + (f" (--time={job.time})" if job.time else ""), info)
        if view.state in ("COMPLETED", "FAILED") or (view.state == "GONE" and has_result):
            return Execution("exited", code if code is not None else (0 if has_result else None), None, info)
        if has_result:  # e.g. OUT_OF_MEMORY after the engine reported its failure
            return Execution("exited", code if code else 1, f"Slurm job {job_id} ended {view.state}", info)
        reason = f" ({view.reason})" if view.reason and view.reason != "None" else ""
        return Execution("error", code, f"Slurm job {job_id} ended {view.state}{reason} without an engine result", info)

    def _collect(self, job: JobRequest, paths: RunPaths, tail: LogTail, wait_for_result: bool = False) -> None:
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

    def _cancel(self, job_id: str | None, job_name: str, info: dict[str, Any]) -> JobView:
        """scancel the job (by id, or by its unique name when sbatch was interrupted) and wait until it has left the queue."""
        if job_id is None:
            _run(["scancel", "--name", job_name, "--user", str(os.getuid())], timeout=30)
            return JobView()
        _run(["scancel", job_id], timeout=30)
        deadline = time.monotonic() + CANCEL_WAIT_S
        try:
            while in_queue(job_id) and time.monotonic() < deadline:
                time.sleep(0.5)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, the cancel request is in
            pass
        view = query_job(job_id)
        info["scheduler_state"] = view.state if view.state not in ("GONE", "UNKNOWN") else "CANCELLED"
        if view.exit_code:
            info["exit_code"] = view.exit_code
        if view.node:
            info["node"] = view.node
        return view


RUNTIME = SlurmRuntime


def touch_lifeline(job: JobRequest) -> None:
    """Tell the job that bench still follows it (see ``slurm_job._watched_engine``)."""
    if job.lifeline_s <= 0:
        return
    try:
        lifeline_path(job).touch()
    except OSError:
        pass  # a full or read-only shared folder: the job's own --time limit still bounds it
