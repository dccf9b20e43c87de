"""Every process a run starts ends with the run, whatever ends bench (SIGKILL included).

The local runtime starts each engine in a session of its own (:mod:`orchestrator.runtimes.process`),
and before the engine:

- makes bench a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)`` through ctypes, Linux): a
  process of the run whose parent exits is re-parented to bench instead of PID 1, so it stays
  within reach and bench reaps it;
- starts this guard, ``python -m orchestrator.runtimes.process_guard ENGINE_PID``, in its own
  session (a Ctrl-C at the terminal does not reach it), with a pipe from bench as its stdin. Every
  :data:`POLL_S` it notes the run's processes (:class:`RunProcesses`): the engine, every process
  of its session or process group, their descendants, and bench's children started since the
  engine (orphans of the run re-parented to bench), each by pid and start time (a pid the kernel
  reuses is never mistaken for one of them).

When the run ends bench writes ``end``; when bench dies the kernel closes the pipe. Either way the
guard ends every process of the run still alive (SIGTERM, :data:`GRACE_S`, SIGKILL), prints their
pids (bench reaps those re-parented to it) and exits. The engine itself also dies with bench
through its parent-death signal (bench_engine.lifeline). Not covered: a process that leaves the
run's session and whose parent exits, both within :data:`POLL_S` of its start, while bench is
being SIGKILLed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

END = b"end"
POLL_S = 0.25
GRACE_S = 3.0
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` the guard needs."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot
    zombie: bool


def read_stat(pid: int) -> ProcStat | None:
    """``/proc/PID/stat`` of ``pid``, or None when it is gone (or there is no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text[text.rfind(")") + 2:].split()  # comm may hold spaces and parentheses
    try:
        return ProcStat(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), fields[0] in ("Z", "X"))
    except (IndexError, ValueError):
        return None


def all_stats() -> list[ProcStat]:
    """Every process of the system (empty where there is no /proc)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = (read_stat(int(name)) for name in names if name.isdigit())
    return [stat for stat in found if stat is not None]


@dataclass
class RunProcesses:
    """The processes of one run: the engine's session and group, their descendants, orphans re-parented to bench."""

    engine: int
    bench: int
    exclude: frozenset[int] = frozenset()
    known: dict[int, int] = field(default_factory=dict)  # pid -> start time

    def __post_init__(self) -> None:
        stat = read_stat(self.engine)
        self.engine_start = stat.start if stat is not None else 0
        if stat is not None:
            self.known[self.engine] = stat.start

    def scan(self) -> None:
        """Note every process of the run alive now."""
        stats = all_stats()
        children: dict[int, list[ProcStat]] = {}
        for stat in stats:
            children.setdefault(stat.ppid, []).append(stat)
            if stat.pid in self.exclude or stat.pid == self.bench:
                continue
            ours = stat.sid == self.engine or stat.pgid == self.engine
            orphan = stat.ppid == self.bench and stat.start >= self.engine_start and stat.pid not in self.exclude
            if ours or orphan or self.known.get(stat.pid) == stat.start:
                self.known[stat.pid] = stat.start
        queue = [pid for pid in self.known]
        while queue:
            for child in children.get(queue.pop(), []):
                if child.pid not in self.known and child.pid not in self.exclude and child.pid != self.bench:
                    self.known[child.pid] = child.start
                    queue.append(child.pid)

    def alive(self) -> list[int]:
        """The noted processes still running (same pid, same start time, not a zombie)."""
        found = []
        for pid, start in self.known.items():
            stat = read_stat(pid)
            if stat is not None and stat.start == start and not stat.zombie:
                found.append(pid)
        return found

    def end(self, grace_s: float = GRACE_S) -> list[int]:
        """SIGTERM every process of the run, SIGKILL those left after ``grace_s``; the pids signalled."""
        self.scan()
        ended = self.alive()
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 1.0)):
            left = self.alive()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.monotonic() + wait
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        return ended


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux); False where the kernel or libc cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def start(engine_pid: int) -> subprocess.Popen[bytes] | None:
    """Start the guard of the run whose engine is ``engine_pid`` (None when it cannot be started)."""
    try:
        return subprocess.Popen([sys.executable, "-m", __name__, str(engine_pid), str(os.getpid())], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                                cwd=Path(__file__).resolve().parents[2])  # where ``orchestrator`` imports from
    except OSError:
        return None


def finish(guard: subprocess.Popen[bytes] | None) -> list[int]:
    """The run is over: the guard ends what is left of it; bench reaps those re-parented to it. The pids ended."""
    if guard is None or guard.stdin is None or guard.stdout is None or guard.returncode is not None:
        return []
    try:
        out, _ = guard.communicate(END, timeout=GRACE_S + 10)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        guard.kill()
        guard.wait()
        return []
    ended = [int(word) for word in out.split() if word.isdigit()]
    for pid in ended:
        try:
            os.waitpid(pid, os.WNOHANG)  # only bench's own children (re-parented orphans): others raise
        except ChildProcessError:
            pass
        except OSError:
            pass
    return ended


def main(argv: list[str]) -> int:
    engine, bench = int(argv[0]), int(argv[1]) if len(argv) > 1 else os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe ends the guard
    run = RunProcesses(engine, bench, frozenset({os.getpid()}))
    while True:
        run.scan()
        ready, _, _ = select.select([sys.stdin.buffer], [], [], POLL_S)
        if ready:
            data = os.read(sys.stdin.fileno(), 64)
            if not data or END in data:
                break
    ended = run.end()
    sys.stdout.write(" ".join(map(str, ended)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
