"""Fixtures of the Slurm tests: a fake Slurm (executables on PATH) and the real one-node cluster.

The fake cluster runs each submitted batch script as a detached local process and answers
``scontrol``/``squeue``/``scancel``/``sinfo`` from a state folder; its behaviour is steered by
files in that folder (``ping`` = the ``scontrol ping`` answer, ``partitions``, ``test_only_error``,
``sbatch_error``). The real cluster is the one ``.ci/slurm-setup.sh`` starts: tests that need it
are skipped when it is not running, and fail instead when BENCH_REQUIRE_SLURM=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_TOOL = textwrap.dedent('''\
    #!{python}
    import os, re, signal, subprocess, sys
    from pathlib import Path

    STATE = Path({state!r})
    tool, args = Path(sys.argv[0]).name, sys.argv[1:]
    (STATE / "calls.log").open("a").write(tool + " " + " ".join(args) + "\\n")

    def alive(job):
        pid = STATE / f"{{job}}.pid"
        if not pid.exists() or (STATE / f"{{job}}.rc").exists():
            return False
        try:
            os.kill(int(pid.read_text()), 0)
            stat = Path(f"/proc/{{int(pid.read_text())}}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie nobody reaped has ended

    def read(job, what):
        path = STATE / f"{{job}}.{{what}}"
        return path.read_text().strip() if path.exists() else None

    def state(job):
        forced = read(job, "force")
        if forced and not alive(job):
            return forced, "0:15"
        if (STATE / f"{{job}}.cancelled").exists() and not alive(job):
            return "CANCELLED", "0:15"
        if alive(job):
            return ("RUNNING" if read(job, "start") else "PENDING"), "0:0"
        rc = STATE / f"{{job}}.rc"
        if rc.exists():
            code = int(rc.read_text().strip() or 1)
            return ("COMPLETED" if code == 0 else "FAILED"), f"{{code}}:0"
        return None, None

    if tool == "scontrol" and args[:1] == ["ping"]:
        text = (STATE / "ping").read_text() if (STATE / "ping").exists() else "Slurmctld(primary) at fake is UP"
        print(text)
        sys.exit(0 if " UP" in text else 1)
    if tool == "sinfo":
        print((STATE / "partitions").read_text() if (STATE / "partitions").exists() else "debug|(null)")
        sys.exit(0)
    if tool == "sbatch":
        if "--test-only" in args:
            error = STATE / "test_only_error"
            if error.exists():
                print("sbatch: error: " + error.read_text().strip(), file=sys.stderr)
                sys.exit(1)
            print("sbatch: Job 1 to start now using 1 processors on nodes fake in partition debug", file=sys.stderr)
            sys.exit(0)
        error = STATE / "sbatch_error"
        if error.exists():
            print("sbatch: error: " + error.read_text().strip(), file=sys.stderr)
            sys.exit(1)
        script = Path(args[-1])
        output = re.search(r"^#SBATCH --output=(.*)$", script.read_text(), re.M).group(1)
        name = re.search(r"^#SBATCH --job-name=(.*)$", script.read_text(), re.M).group(1)
        counter = STATE / "next_id"
        job = int(counter.read_text()) if counter.exists() else 100
        counter.write_text(str(job + 1))
        (STATE / f"{{job}}.name").write_text(name)
        rc = STATE / f"{{job}}.rc"
        wait = ""
        for arg in args:
            if arg.startswith("--dependency=afterany:"):
                before = STATE / arg.split(":")[-1]
                (STATE / f"{{job}}.dependency").write_text(arg.split("=", 1)[1])
                wait = f"while [ ! -f {{before}}.rc ] && [ ! -f {{before}}.cancelled ] && [ ! -f {{before}}.force ]; do sleep 0.1; done; "
        stamp = "date +%Y-%m-%dT%H:%M:%S"
        shell = (f"{{wait}}{{stamp}} > {{STATE}}/{{job}}.start; SLURM_JOB_ID={{job}} bash {{script}} >> {{output}} 2>&1; "
                 f"code=$?; {{stamp}} > {{STATE}}/{{job}}.end; echo $code > {{rc}}")
        proc = subprocess.Popen(["bash", "-c", shell], start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (STATE / f"{{job}}.pid").write_text(str(proc.pid))
        print(f"{{job}};fake")
        sys.exit(0)
    if tool == "scontrol" and args[:2] == ["show", "job"]:
        job = args[-1]
        st, code = state(job)
        if st is None:
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            sys.exit(1)
        if (STATE / f"{{job}}.gone").exists():
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            sys.exit(1)
        node = (STATE / "node").read_text().strip() if (STATE / "node").exists() else "fake"
        started, ended = read(job, "start") or "Unknown", read(job, "end") or "Unknown"
        print(f"JobId={{job}} JobName={{read(job, 'name') or 'x'}} JobState={{st}} Reason=None ExitCode={{code}} "
              f"StartTime={{started}} EndTime={{ended}} NodeList={{node}} BatchHost={{node}}")
        sys.exit(0)
    if tool == "scontrol" and args[:2] == ["show", "node"]:
        kind = (STATE / "node_type").read_text().strip() if (STATE / "node_type").exists() else "Gres=(null) ActiveFeatures=(null)"
        print(f"NodeName={{args[-1]}} Arch=x86_64 {{kind}} Partitions=debug State=IDLE")
        sys.exit(0)
    if tool == "squeue":
        fmt = args[args.index("-o") + 1]
        node = (STATE / "node").read_text().strip() if (STATE / "node").exists() else "fake"
        for job in args[args.index("-j") + 1].split(","):
            if (STATE / f"{{job}}.gone").exists():
                continue
            st = state(job)[0]
            if "-t" in args and st is not None:  # -t all: ended jobs the controller still knows too
                print(f"{{job}}|{{st}}|{{node if st != 'PENDING' else ''}}|None|{{read(job, 'name')}}|"
                      f"{{read(job, 'start') or 'N/A'}}|{{read(job, 'end') or 'NONE'}}")
            elif "-t" not in args and alive(job):
                print(f"{{st}}|{{node}}|None|{{read(job, 'name')}}" if "|" in fmt else st)
        sys.exit(0)
    if tool == "scancel":
        if args[:1] == ["--name"]:
            sys.exit(0)
        job = args[0]
        (STATE / f"{{job}}.cancelled").write_text("")
        if alive(job):
            os.killpg(int((STATE / f"{{job}}.pid").read_text()), signal.SIGTERM)
        sys.exit(0)
    print(f"fake {{tool}}: unsupported {{args}}", file=sys.stderr)
    sys.exit(2)
''')


class FakeSlurm:
    def __init__(self, root: Path):
        self.bin = root / "bin"
        self.state = root / "state"
        self.bin.mkdir(parents=True)
        self.state.mkdir()
        source = FAKE_TOOL.format(python=sys.executable, state=str(self.state))
        for tool in ("sbatch", "squeue", "scontrol", "scancel", "sinfo"):
            path = self.bin / tool
            path.write_text(source)
            path.chmod(0o755)

    def set(self, name: str, text: str) -> None:
        (self.state / name).write_text(text)

    def calls(self) -> list[str]:
        log = self.state / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def end_as(self, job: str, state: str) -> None:
        """The job ends ``state`` (PREEMPTED, NODE_FAIL...; GONE: it vanishes from the controller): killed, reported so."""
        (self.state / (f"{job}.gone" if state == "GONE" else f"{job}.force")).write_text(state)
        if state == "GONE":
            (self.state / f"{job}.force").write_text("CANCELLED")
        try:
            os.killpg(int((self.state / f"{job}.pid").read_text()), 9)
        except (OSError, ValueError):
            pass

    def submitted(self) -> list[tuple[str, str, str | None]]:
        """(job id, job name, dependency) of every job, in submission order."""
        jobs = sorted(int(p.stem) for p in self.state.glob("*.name"))
        return [(str(j), (self.state / f"{j}.name").read_text(), (self.state / f"{j}.dependency").read_text()
                 if (self.state / f"{j}.dependency").exists() else None) for j in jobs]

    def times(self, job: str) -> tuple[str | None, str | None]:
        read = [(self.state / f"{job}.{what}") for what in ("start", "end")]
        return tuple(p.read_text().strip() if p.exists() else None for p in read)  # type: ignore[return-value]

    def remove(self, tool: str) -> None:
        (self.bin / tool).unlink()

    def running_jobs(self) -> list[str]:
        jobs = []
        for pid_file in self.state.glob("*.pid"):
            job = pid_file.stem
            if (self.state / f"{job}.rc").exists():
                continue
            try:
                stat = Path(f"/proc/{int(pid_file.read_text())}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[0] != "Z":  # zombies have ended
                jobs.append(job)
        return jobs


@pytest.fixture()
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """Fake Slurm commands first on PATH (and no BENCH_SLURM_* settings from the environment)."""
    fake = FakeSlurm(tmp_path / "fake-slurm")
    monkeypatch.setenv("PATH", f"{fake.bin}{os.pathsep}{os.environ.get('PATH', '')}")
    for key in list(os.environ):
        if key.startswith("BENCH_SLURM_"):
            monkeypatch.delenv(key)
    yield fake
    for job in fake.running_jobs():
        try:
            os.killpg(int((fake.state / f"{job}.pid").read_text()), 9)
        except OSError:
            pass


def _cluster_problem() -> str | None:
    """Why the real Slurm cluster cannot be used (None when it can)."""
    for tool in ("sbatch", "squeue", "scontrol", "scancel", "sinfo"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        if " UP" not in ping.stdout:
            return f"controller not up: {(ping.stdout + ping.stderr).strip()}"
        nodes = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    states = nodes.stdout.split()
    if not any(s.rstrip("*~#!%$@^-") in ("idle", "mix", "alloc") for s in states):
        return f"no usable node (sinfo: {' '.join(states) or 'nothing'})"
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The real cluster (.ci/slurm-setup.sh): skip without it, fail with BENCH_REQUIRE_SLURM=1."""
    problem = _cluster_problem()
    if problem is None:
        return
    message = f"Slurm cluster unavailable: {problem} (start one with .ci/slurm-setup.sh)"
    if os.environ.get("BENCH_REQUIRE_SLURM") == "1":
        pytest.fail(message + "; BENCH_REQUIRE_SLURM=1 requires it", pytrace=False)
    pytest.skip(message)
