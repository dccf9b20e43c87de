"""Engine processes die with the process that started them (bench, or the launcher of the workers).

:func:`tie_to_parent` asks the Linux kernel for a parent-death signal (``prctl(PR_SET_PDEATHSIG)``
through ctypes): when the parent dies, even by SIGKILL, this process gets ``signal`` (SIGTERM: the
engine writes an ``interrupted`` result and exits). A watchdog thread backs it up, on every OS:
it polls the parent's pid, sends the same signal when the parent is gone and, if the process is
still alive :data:`GRACE_S` seconds later (stuck in native code), ends it with ``os._exit``.

The parent names itself in ``BENCH_PARENT_PID``; a parent that died before this process could
ask for the signal (the race prctl leaves open) is caught by comparing it with ``os.getppid()``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PARENT_ENV = "BENCH_PARENT_PID"
# Set by bench or the launcher for the processes they start, never taken from a user's environment
# (orchestrator.envvars.INTERNAL_NAMES holds the same names).
INTERNAL_ENV = frozenset({"BENCH_HEARTBEAT", PARENT_ENV, "BENCH_WORKER", "BENCH_LAUNCH_WALL", "BENCH_RUNTIME"})
PR_SET_PDEATHSIG = 1
GRACE_S = 15.0
POLL_S = 0.5
EXIT_ORPHANED = 143


def _set_pdeathsig(sig: int) -> bool:
    """prctl(PR_SET_PDEATHSIG, sig); False where it is not available (not Linux, no libc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int, sig: int, grace_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    try:
        os.kill(os.getpid(), sig)
    except OSError:
        pass
    time.sleep(grace_s)
    os._exit(EXIT_ORPHANED)


def tie_to_parent(sig: int = signal.SIGTERM, grace_s: float = GRACE_S) -> int:
    """Die with the parent process; returns the parent's pid. Call early, from the main thread."""
    expected = os.environ.get(PARENT_ENV, "")
    parent = os.getppid()
    _set_pdeathsig(sig)
    if expected.isdigit() and int(expected) != parent:  # the parent died before prctl: we were reparented
        os.kill(os.getpid(), sig)
    threading.Thread(target=_watch, args=(parent, sig, grace_s), name="bench-lifeline", daemon=True).start()
    return parent
