"""Fault injection for the tests: ``BENCH_FAULT=rank:step[:exit|raise|hang|block][,...]``.

Worker ``rank`` (the one process of a single-process run is rank 0) dies (``os._exit(3)``, no
result), raises, stops responding at its step number ``step`` (from 1), or blocks there with
SIGTERM masked, as a rank stuck inside a collective (native code, where no Python signal handler
runs) does (bench_engine.launch).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from bench_engine.api import StepBatch, Workload
from bench_engine.launch import WorkerInfo

FAULT_ENV = "BENCH_FAULT"


class InjectedFault(RuntimeError):
    """Raised by a worker told to fail (BENCH_FAULT=rank:step:raise)."""


def inject_fault(workload: Workload, worker: WorkerInfo | None) -> None:
    """Arm BENCH_FAULT (``rank:step[:mode]``, comma-separated) on ``workload`` where it names this worker
    (a single-process run is rank 0)."""
    rank = worker.rank if worker is not None else 0
    for entry in filter(None, os.environ.get(FAULT_ENV, "").split(",")):
        parts = entry.split(":")
        if int(parts[0]) == rank:
            _arm(workload, rank, int(parts[1]), parts[2] if len(parts) > 2 else "exit")


def _arm(workload: Workload, rank: int, step: int, mode: str) -> None:
    inner = workload.step
    count = [0]

    def faulty_step(batch: StepBatch) -> None:
        count[0] += 1
        if count[0] >= step:
            print(f"[bench-engine] BENCH_FAULT: rank {rank} fails at step {count[0]} ({mode})", file=sys.stderr, flush=True)
            if mode == "raise":
                raise InjectedFault(f"injected fault on rank {rank} at step {count[0]}")
            if mode == "block":  # as in native code: SIGTERM stays pending, SIGUSR1 (stacks) still works
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
            if mode in ("hang", "block"):
                while True:
                    time.sleep(3600)
            os._exit(3)
        inner(batch)

    workload.step = faulty_step  # type: ignore[method-assign]
