"""One process per device: the engine entrypoint launches its workers and writes the single result.

An engine whose :meth:`~bench_engine.api.Engine.processes` is above 1 for a spec (PyTorch with
``devices > 1``) is started once, as usual (``<engine> --spec S --result R``). That process is the
*launcher*: it imports no framework, starts one worker per device with the same command line and
a torchrun-style environment (``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``, ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``; ``NCCL_NVLS_ENABLE=0`` always), relays
their output prefixed with ``[rank r]``, waits for them and writes the run's one result file.

Every worker runs the whole harness on its share of each global batch and writes its own
result document (full timing windows, start time) into a private folder beside the result.
The launcher merges them: the work block is rank 0's (every rank counts the global batches, so
steps and samples are all workers' samples); times are the slowest worker's: each timing
window, each epoch and the warmup take the maximum over the ranks, setup is the latest
"ready" instant over the ranks counted from the launcher's start, so the steady-state
throughput is all workers' samples over the slowest worker's time. Per-rank figures are kept
in ``measurements.workers``.

Failure never hangs: the first worker to exit non-zero is the root cause; the others get
:data:`GRACE_S` seconds to notice (a dead peer breaks their collectives), then SIGTERM, then
SIGKILL. The result then says failed, with that worker's reason, or its exit code or signal and
its last output lines when it died without writing anything. SIGTERM or SIGINT to the launcher
stops every worker the same way and reports ``interrupted``.

A worker that stops making progress (bench_engine.watch: no phase change, no finished step and no
output for ``measurement.stall_s`` seconds after setup, ``measurement.setup_stall_s`` during setup
and rendezvous) ends the run as failed, kind ``stalled``: the launcher asks every worker for its
Python stacks (SIGUSR1, printed into the engine log, the stalled rank's also in the failure's
traceback), then ends every worker and every process below it. Each worker's phase lines
(bench_engine.progress) are relayed with the others, so the progress display shows every rank.

``BENCH_FAULT=rank:step[:exit|raise|hang|block][,...]`` (tests only) makes worker ``rank`` (the
one process of a single-process run is rank 0) die (``os._exit(3)``, no result), raise, stop
responding at its step number ``step`` (from 1), or block there with SIGTERM masked, as a rank
stuck inside a collective (native code, where no Python signal handler runs) does.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench_engine import progress
from bench_engine.api import Engine
from bench_engine.contract import EngineResult, RunSpec
from bench_engine.lifeline import INTERNAL_ENV, PARENT_ENV
from bench_engine.report import Failure
from bench_engine.result import base_result, failed, log
from bench_engine.watch import DUMP_WAIT_S, STACK_SIGNAL, RankWatch, kill_tree

WORKER_ENV = "BENCH_WORKER"
LAUNCH_WALL_ENV = "BENCH_LAUNCH_WALL"
GRACE_S = 10.0  # after the first failure, how long the other workers may take to exit by themselves (env BENCH_LAUNCH_GRACE_S)
KILL_WAIT_S = 10.0  # after SIGTERM, before SIGKILL
STALL_KILL_WAIT_S = 2.0  # after SIGTERM to stalled workers (blocked in native code, they rarely act on it)
POLL_S = 0.5  # how often the launcher reads the workers' heartbeats
TAIL_LINES = 25
WORKER_KEY = "_worker"  # private key of a worker's document (never in the final result)
# Kept in every worker's environment: NVLink multicast stays off on shared multi-GPU hosts (NCCL,
# PyTorch symmetric memory, NVSHMEM), also when the entrypoint is started outside bench.
FIXED_WORKER_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class WorkerInfo:
    """This process's place in a launched run (torchrun's variables)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int


def worker_info() -> WorkerInfo | None:
    """The worker this process is, or None when it is not a launched worker."""
    if os.environ.get(WORKER_ENV) != "1":
        return None
    env = os.environ
    return WorkerInfo(
        rank=int(env["RANK"]),
        world_size=int(env["WORLD_SIZE"]),
        local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
        local_world_size=int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])),
        master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
        master_port=int(env.get("MASTER_PORT", "0")),
    )


def free_port() -> int:
    """A TCP port free on the loopback interface now (the rendezvous of the workers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def worker_env(rank: int, world: int, port: int, launch_wall: float, heartbeat: Path | None = None) -> dict[str, str]:
    """The environment of worker ``rank``: the launcher's (less bench's internal variables it inherited),
    plus torchrun's variables and the launcher's own internal ones (its pid, its start, the rank's heartbeat).

    Each worker's share of the cores bounds its compile-worker pool (``TORCHINDUCTOR_COMPILE_THREADS``,
    unless set): N ranks compiling at once otherwise start N pools as large as the machine.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {
        "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, cores // max(1, world))),
        **{key: value for key, value in os.environ.items() if key not in INTERNAL_ENV or key == "BENCH_RUNTIME"},
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        WORKER_ENV: "1",
        LAUNCH_WALL_ENV: repr(launch_wall),
        PARENT_ENV: str(os.getpid()),  # the worker dies with the launcher (bench_engine.lifeline)
        "PYTHONUNBUFFERED": "1",
        **({progress.HEARTBEAT_ENV: str(heartbeat)} if heartbeat is not None else {}),
        **FIXED_WORKER_ENV,
    }


# ----------------------------------------------------------------------------- merging the workers' documents


def _offset(result: EngineResult, launch_wall: float) -> float:
    """Seconds from the launcher's start to the worker's start."""
    start = (result.extra.get(WORKER_KEY) or {}).get("start_wall")
    return max(0.0, float(start) - launch_wall) if start is not None else 0.0


def merge_results(ranks: list[EngineResult], launch_wall: float) -> EngineResult:
    """The single result of a run whose workers all finished ok (``ranks`` in rank order): rank 0's result,
    the slowest worker's times (:meth:`bench_engine.contract.EngineResult.merge`), each worker's own figures."""
    offsets = [_offset(r, launch_wall) for r in ranks]
    return EngineResult.merge(ranks, offsets, [r.extra[WORKER_KEY]["rank"] for r in ranks])


# ----------------------------------------------------------------------------- the launcher


@dataclass
class _Worker:
    rank: int
    proc: subprocess.Popen[str]
    result: Path
    tail: collections.deque[str]
    code: int | None = None
    exited_at: float | None = None
    dump: list[str] | None = None  # its output since it was asked for its stacks


def _relay(worker: _Worker, watch: RankWatch) -> None:
    assert worker.proc.stdout is not None
    for line in iter(worker.proc.stdout.readline, ""):
        watch.output(worker.rank)
        worker.tail.append(line.rstrip("\n"))
        if worker.dump is not None:
            worker.dump.append(line)
        sys.stderr.write(f"[rank {worker.rank}] {line}")
        sys.stderr.flush()
    worker.proc.stdout.close()


def _wait(worker: _Worker, exits: queue.Queue[int]) -> None:
    worker.code = worker.proc.wait()
    worker.exited_at = time.monotonic()
    exits.put(worker.rank)


def _signal_all(workers: list[_Worker], sig: int) -> None:
    for worker in workers:
        if worker.proc.poll() is None:
            try:
                worker.proc.send_signal(sig)
            except ProcessLookupError:
                pass


def _stop_all(workers: list[_Worker], exits: queue.Queue[int], grace_s: float, term_wait_s: float = KILL_WAIT_S) -> None:
    """Wait ``grace_s`` for the workers to exit by themselves, then SIGTERM, then SIGKILL (with every
    process below them: compile workers and the like)."""
    for sig, wait in ((None, grace_s), (signal.SIGTERM, term_wait_s), (signal.SIGKILL, KILL_WAIT_S)):
        if sig == signal.SIGKILL:
            kill_tree([w.proc.pid for w in workers if w.proc.poll() is None])
        elif sig is not None:
            _signal_all(workers, sig)
        deadline = time.monotonic() + wait
        while any(w.code is None for w in workers) and time.monotonic() < deadline:
            try:
                exits.get(timeout=0.2)
            except queue.Empty:
                pass
        if all(w.code is not None for w in workers):
            return


def _read(path: Path) -> EngineResult | None:
    """A worker's result file, or None when it wrote none (or not a whole one)."""
    try:
        return EngineResult.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _stop_stalled(workers: list[_Worker], exits: queue.Queue[int]) -> None:
    """Ask every running worker for its stacks, give them :data:`DUMP_WAIT_S` to print, then end them all."""

    running = [w for w in workers if w.code is None]
    if STACK_SIGNAL is not None:
        log("asking every running worker for its Python stacks (SIGUSR1)")
        for worker in running:
            worker.dump = []
        _signal_all(running, STACK_SIGNAL)
        time.sleep(DUMP_WAIT_S)
    _stop_all(workers, exits, 0.0, term_wait_s=STALL_KILL_WAIT_S)


@dataclass
class _Crew:
    """The launched workers and what the launcher learned while they ran."""

    workers: list[_Worker] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    exits: queue.Queue[int] = field(default_factory=queue.Queue)
    interrupted: bool = False
    stalled: tuple[list[_Worker], str] | None = None  # the stalled workers and the message


def _start(crew: _Crew, engine: Engine, world: int, spec_path: Path, folder: Path, records: list[Path], watch: RankWatch,
           launch_wall: float) -> None:
    """Start one worker per device with its relay and wait threads."""
    port = free_port()
    module = type(engine).__module__.split(".")[0]
    log(f"launching {world} worker processes (one per device), rendezvous 127.0.0.1:{port}")
    for rank in range(world):
        out = folder / f"rank-{rank}.json"
        argv = [sys.executable, "-m", module, "--spec", str(spec_path), "--result", str(out)]
        proc = subprocess.Popen(argv, env=worker_env(rank, world, port, launch_wall, records[rank]), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        worker = _Worker(rank, proc, out, collections.deque(maxlen=TAIL_LINES))
        crew.workers.append(worker)
        for target, args in ((_relay, (worker, watch)), (_wait, (worker, crew.exits))):
            thread = threading.Thread(target=target, args=args, daemon=True)
            thread.start()
            crew.threads.append(thread)


def _supervise(crew: _Crew, watch: RankWatch, world: int) -> None:
    """Wait for the workers; stop them all at the first failure or stall."""
    workers, exits = crew.workers, crew.exits
    while any(w.code is None for w in workers):
        try:
            rank = exits.get(timeout=POLL_S)
        except queue.Empty:
            culprits = watch.poll({w.rank for w in workers if w.code is None})
            if culprits:
                message = watch.stall_message(culprits, world)
                log(f"{message}; stopping every worker")
                crew.stalled = ([workers[c.rank] for c in culprits], message)
                _stop_stalled(workers, exits)
                return
            continue
        if workers[rank].code != 0:
            log(f"rank {rank} {_describe_exit(workers[rank].code)}; stopping the other workers")
            _stop_all(workers, exits, float(os.environ.get("BENCH_LAUNCH_GRACE_S", GRACE_S)))
            return


def launch(engine: Engine, spec: RunSpec, spec_path: Path, result_path: Path) -> tuple[EngineResult, int]:
    """Run ``spec`` as ``engine.processes(spec)`` worker processes; return the single result and exit code."""

    launch_wall = time.time()
    world = engine.processes(spec)
    folder = result_path.parent / f".{result_path.name}.workers"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    crew = _Crew()
    records = [progress.new_record(folder / f"rank-{rank}.heartbeat") for rank in range(world)]
    watch = RankWatch(records, *progress.stall_bounds(spec.measurement))
    try:
        _start(crew, engine, world, spec_path, folder, records, watch, launch_wall)
        _supervise(crew, watch, world)
    except KeyboardInterrupt:
        crew.interrupted = True
        log("interrupted: stopping every worker")
        _stop_all(crew.workers, crew.exits, 0.0)
    for thread in crew.threads:
        thread.join(timeout=5)
    try:
        return _outcome(engine, spec, crew, [_read(w.result) for w in crew.workers], launch_wall)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _outcome(engine: Engine, spec: RunSpec, crew: _Crew, docs: list[EngineResult | None], launch_wall: float) -> tuple[EngineResult, int]:
    """The run's one result from its workers' (``docs``, None where a worker wrote none) and the exit code."""
    workers, world = crew.workers, len(crew.workers)
    if crew.stalled is not None:
        culprits, message = crew.stalled
        stacks = "".join(f"--- rank {w.rank}, Python stacks and last output ---\n{''.join(w.dump or [])}" for w in culprits)
        return _failed(engine, spec, docs, Failure("stalled", message, stacks)), 1
    oks = [d for d in docs if d is not None and d.status == "ok"]
    if not crew.interrupted and all(w.code == 0 for w in workers) and len(oks) == len(docs):
        try:
            merged = merge_results(oks, launch_wall)
            return replace(merged, measurements=merged.measurements.capped(spec.measurement.max_step_samples)
                           if merged.measurements is not None else None), 0
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:
            return _failed(engine, spec, docs, Failure("crash", f"cannot merge the workers' results: {exc}")), 1
    if crew.interrupted:
        return _failed(engine, spec, docs, Failure("interrupted", "terminated by signal")), 130
    root = min((w for w in workers if w.code not in (0, None)), key=lambda w: w.exited_at or float("inf"), default=None)
    if root is None:  # every worker exited 0 but one result is missing or not ok
        bad = next(w for w, d in zip(workers, docs, strict=True) if d is None or d.status != "ok")
        return _failed(engine, spec, docs, Failure("crash", f"rank {bad.rank} of {world} exited 0 without an ok result")), 1
    doc = docs[root.rank]
    if doc is not None and doc.failure:
        kind = doc.failure["kind"]
        failure = Failure(kind, f"rank {root.rank} of {world}: {doc.failure['message']}", doc.failure.get("traceback"))
        return _failed(engine, spec, docs, failure), 130 if kind == "interrupted" else 1
    tail = "\n".join(root.tail)
    message = f"rank {root.rank} of {world} {_describe_exit(root.code)} without writing a result; last output:\n{tail}"
    return _failed(engine, spec, docs, Failure("crash", message)), 1


def _failed(engine: Engine, spec: RunSpec, docs: list[EngineResult | None], failure: Failure) -> EngineResult:
    """A failed result for the run: rank 0's environment and partial work when it wrote them."""

    result = base_result(engine, spec)
    rank0 = docs[0] if docs else None
    if rank0 is not None:
        measurements = rank0.measurements.capped(spec.measurement.max_step_samples) if rank0.measurements is not None else None
        result = replace(result, environment=rank0.environment or result.environment, work=rank0.work, measurements=measurements)
    message = failure.message
    if len(message) > 2000:
        message = message[:400] + "\n...\n" + message[-1500:]
    failure = replace(failure, message=message, traceback=failure.traceback[-8000:] if failure.traceback else None)
    log(f"failed ({failure.kind}): {message.splitlines()[0] if message else ''}")
    return failed(result, failure)
