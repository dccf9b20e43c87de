"""The Slurm client commands the slurm runtime runs (``sbatch``, ``scontrol``, ``squeue``, ``sinfo``,
``scancel``) and what it reads from them: the cluster's tools, controller and partitions, and the
scheduler's view of a job (:class:`JobView`, from ``scontrol show job``, ``squeue`` as the fallback;
never ``sacct``: accounting may be off)."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import BadInput

TOOLS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
COMMAND_TIMEOUT_S = 60.0
# Job states after which nothing more will happen to the job (it may still be COMPLETING).
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED"}


def run_command(argv: list[str], timeout: float = COMMAND_TIMEOUT_S, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client command; OSError/timeouts come back as a failed CompletedProcess."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin, cwd=cwd,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]}: no answer within {timeout:g} s")
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: {exc.strerror or exc}")


def command_message(proc: subprocess.CompletedProcess[str]) -> str:
    text = " ".join(line.strip() for line in (proc.stderr or proc.stdout or "").strip().splitlines() if line.strip())
    return text or f"exit code {proc.returncode}"


def check_tools() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise BadInput(f"--runtime slurm: Slurm command{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found on PATH "
                       "(run bench where the Slurm client commands are installed, e.g. a login node)")


def check_controller() -> None:
    proc = run_command(["scontrol", "ping"], timeout=30)
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or "DOWN" in text or " UP" not in text:
        raise BadInput(f"--runtime slurm: the Slurm controller is unreachable ({command_message(proc) if proc.returncode else text})")


def partitions() -> dict[str, str]:
    """Partition name -> its generic resources (e.g. 'gpu:8' or '(null)')."""
    proc = run_command(["sinfo", "-h", "-o", "%R|%G"])
    if proc.returncode != 0:
        raise BadInput(f"--runtime slurm: sinfo failed: {command_message(proc)}")
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        name, _, gres = line.strip().partition("|")
        if name:
            found[name] = (found.get(name, "") + "," + gres).strip(",")
    return found


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
    name: str | None = None
    start: str | None = None  # StartTime, EndTime as scontrol reports them (None: unknown)
    end: str | None = None


def _time(value: str | None) -> str | None:
    return value if value and value not in ("Unknown", "None", "NONE", "N/A", "(null)") else None


def query_job(job_id: str) -> JobView:
    """The scheduler's view of a job: scontrol first, squeue when scontrol has nothing."""
    proc = run_command(["scontrol", "show", "job", "-o", job_id], timeout=30)
    if proc.returncode == 0 and "JobState=" in proc.stdout:
        fields = parse_job(proc.stdout)
        node = fields.get("BatchHost") or fields.get("NodeList") or None
        state = fields.get("JobState", "UNKNOWN")
        return JobView(state, node if node and node != "(null)" else None, fields.get("Reason"), fields.get("ExitCode"), True,
                       fields.get("JobName"), _time(fields.get("StartTime")), _time(fields.get("EndTime")))
    queue = run_command(["squeue", "-h", "-j", job_id, "-o", "%T|%N|%r|%j"], timeout=30)
    if queue.returncode == 0 and queue.stdout.strip():
        state, node, reason, name = ([*queue.stdout.strip().splitlines()[0].split("|"), "", "", ""])[:4]
        return JobView(state or "UNKNOWN", node or None, reason or None, None, True, name or None)
    if "Invalid job id" in (proc.stderr + queue.stderr) or (queue.returncode == 0 and not queue.stdout.strip() and proc.returncode != 0):
        return JobView("GONE", known=True)  # purged from the controller: it ended long ago
    return JobView()


def in_queue(job_id: str) -> bool:
    proc = run_command(["squeue", "-h", "-j", job_id, "-o", "%T"], timeout=30)
    return proc.returncode == 0 and bool(proc.stdout.strip())


class QueueWatch:
    """One ``squeue`` call answers for every job this bench follows (the threads of a matrix in flight share it), at
    most one call per ``max_age`` seconds however many jobs there are; ``scontrol`` is asked only about a job squeue
    does not list, and for a job's final state (its exit code)."""

    FORMAT = "%i|%T|%N|%r|%j|%S|%e"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: set[str] = set()
        self._asked: set[str] = set()
        self._views: dict[str, JobView] = {}
        self._at = float("-inf")

    def view(self, job_id: str, max_age: float) -> JobView | None:
        """The job as the latest ``squeue`` listed it (None: not listed, ask scontrol)."""
        with self._lock:
            self._jobs.add(job_id)
            if time.monotonic() - self._at >= max_age or job_id not in self._asked:
                self._refresh()
            return self._views.get(job_id)

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._jobs.discard(job_id)
            self._views.pop(job_id, None)

    def _refresh(self) -> None:
        ids = sorted(self._jobs)
        proc = run_command(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", self.FORMAT], timeout=30)
        self._at, self._asked, self._views = time.monotonic(), set(ids), {}
        if proc.returncode != 0:
            return  # every job is asked about with scontrol instead
        for line in proc.stdout.splitlines():
            job, state, node, reason, name, start, end = ([*line.strip().split("|"), *[""] * 7])[:7]
            if job in self._jobs and state:
                self._views[job] = JobView(state, node or None, reason or None, None, True, name or None, _time(start), _time(end))


WATCH = QueueWatch()

_NODE_TYPES: dict[str, str | None] = {}


def node_type(node: str) -> str | None:
    """The kind of ``node`` as ``scontrol show node`` reports it: its GRES (GPU names), features and partitions
    (``gres=gpu:h100:8 features=ib partitions=gpu``); asked once per node, None when unknown."""
    if node not in _NODE_TYPES:
        proc = run_command(["scontrol", "show", "node", "-o", node], timeout=30)
        fields = parse_job(proc.stdout) if proc.returncode == 0 else {}
        parts = [f"{key}={fields[name]}" for key, name in (("gres", "Gres"), ("features", "ActiveFeatures"), ("partitions", "Partitions"))
                 if fields.get(name) not in (None, "", "(null)")]
        _NODE_TYPES[node] = " ".join(parts) if fields else None
    return _NODE_TYPES[node]
