"""The engine entrypoint: ``<engine> --spec SPEC.json --result RESULT.json``.

Exit codes: 0 the result says ok; 1 the result says failed; 2 the spec could not be read;
130 interrupted (SIGINT or SIGTERM). A result file is written in every case where the spec
could be read, atomically, so the orchestrator never sees half a file.

The spec is parsed once, into a :class:`~bench_engine.contract.RunSpec`; the engine builds an
:class:`~bench_engine.contract.EngineResult`; JSON appears only when the files are read and written.

When the engine runs one process per device (``Engine.processes(spec) > 1``), this process
launches the workers and writes their merged result (bench_engine.launch); a worker (marked
by its environment) runs the spec on its device and writes its own document for the launcher.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

from bench_engine import progress
from bench_engine.api import Engine, UnsupportedError, Workload
from bench_engine.contract import EngineResult, RunSpec
from bench_engine.data import DatasetError, SplitHash, map_split
from bench_engine.faults import inject_fault
from bench_engine.harness import Measurements, run_harness
from bench_engine.initweights import InitError
from bench_engine.launch import WORKER_KEY, WorkerInfo, launch, worker_info
from bench_engine.lifeline import tie_to_parent
from bench_engine.report import Environment, Failure, Work, as_json
from bench_engine.result import base_environment, base_result, failed, log, write_json_atomic
from bench_engine.schedule import samples_read
from bench_engine.watch import SelfWatch, enable_stack_dumps
from bench_engine.weights import WeightChange

_START = time.perf_counter()
_START_WALL = time.time()


class _Terminated(KeyboardInterrupt):
    """SIGTERM turned into an interrupt so the result is still written."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def _work(spec: RunSpec, workload: Workload, dataset: tuple[str, int], measured: Measurements, moved: WeightChange | None) -> Work:
    """What the engine did: read back from its objects (workload.readback) and counted by the loop, never copied
    from the spec; a field the engine cannot read back is left out (the schema or the parity check then says so).
    ``dataset``: the sha256 and sample count of the split it loaded."""
    world = workload.world_size
    # the batch the loop really issued; before any step (a failed run) the planned one, which no check reads
    batch_global = measured.batch_max or spec.parity.batch.per_device * world
    return Work.of(
        workload.readback, trainable_parameters=int(workload.trainable_parameters), dataset_sha256=dataset[0],
        dataset_samples=dataset[1], batch_per_device=max(1, batch_global // world), batch_global=batch_global, world_size=world,
        epochs=measured.epochs_done, steps=measured.steps_done, samples=measured.samples_done,
        data_placement=workload.data_placement, precision=workload.precision, optimizations=workload.optimizations,
        weight_change=moved,
    )


def _weight_change(workload: Workload) -> WeightChange | None:
    """The workload's weight change, or None when it cannot say (never a reason to fail a finished run)."""
    try:
        return workload.weight_change()
    except Exception as exc:
        log(f"weight change not measured: {type(exc).__name__}: {exc}")
        return None


def _failure(engine: Engine, exc: BaseException) -> tuple[Failure, int]:
    """The failure record of ``exc`` and the exit code it means."""
    if isinstance(exc, KeyboardInterrupt):
        return Failure("interrupted", "terminated by signal" if isinstance(exc, _Terminated) else "interrupted"), 130
    kind = "crash"
    if isinstance(exc, UnsupportedError):
        kind = "unsupported"
    elif isinstance(exc, (DatasetError, InitError)):
        kind = "bad_spec"
    elif engine.is_out_of_memory(exc):
        kind = "oom"
    failure = Failure(kind, f"{type(exc).__name__}: {exc}".strip()[:2000], traceback.format_exc()[-8000:])
    log(f"failed ({kind}): {failure.message}")
    return failure, 1


@dataclass
class _Run:
    """What a run got to, kept as it goes so that a failure still reports it."""

    environment: Environment
    workload: Workload | None = None
    measured: Measurements = field(default_factory=Measurements)
    dataset: tuple[str, int] = ("", 0)
    setup_s: float = 0.0
    setup_parts: dict[str, float] | None = None  # ResultMeasurements.setup_parts
    moved: WeightChange | None = None


def _steps(engine: Engine, spec: RunSpec, worker: WorkerInfo | None, run: _Run) -> None:
    """Everything a run does, from the environment to the last step, recorded in ``run``."""
    marks = [time.perf_counter()]
    parity = spec.parity
    hashing = SplitHash(parity.dataset.path)  # the whole split, read beside the import and the prepare
    run.environment = run.environment.seen(engine.environment(spec))
    marks.append(time.perf_counter())
    # the split is memory-mapped: a single process copies out the samples its steps read (all of them in a
    # training epoch), a worker only its own shard; the hash is the spec's until the read-back one is in
    mapped = map_split(parity.dataset.path, parity.dataset.sha256, mmap=True)
    read = samples_read(mapped.samples, parity.batch.global_, parity.steps_per_epoch)
    dataset = mapped.prefix(read, copy=worker is None)
    marks.append(time.perf_counter())
    workload = engine.prepare(spec, dataset)
    marks.append(time.perf_counter())
    try:
        sha = hashing.verified(parity.dataset.sha256)  # before the first step: no step runs beside the hash
    except DatasetError:
        workload.close()  # not the spec's data: the run has no work to report
        raise
    run.workload, run.dataset = workload, (sha, dataset.samples)
    inject_fault(run.workload, worker)
    marks.append(time.perf_counter())
    held = f"; the steps read its first {dataset.held}, only those are held" if dataset.held < dataset.samples else ""
    log(f"dataset {sha[:12]} ({dataset.samples} samples{held}) mapped in {marks[2] - marks[1]:.2f}s, "
        f"hashed in {hashing.hash_s:.2f}s beside the setup (waited {hashing.wait_s:.2f}s for it)")
    run.setup_s = marks[-1] - _START
    run.setup_parts = {"before_s": marks[0] - _START, "environment_s": marks[1] - marks[0], "dataset_s": marks[2] - marks[1],
                       "prepare_s": marks[3] - marks[2], "hash_wait_s": marks[4] - marks[3], "hash_s": hashing.hash_s}
    parts = ", ".join(f"{name[:-2]} {seconds:.2f}s" for name, seconds in run.setup_parts.items() if name != "hash_s")
    log(f"setup done in {run.setup_s:.2f}s ({parts}); {spec.parity.total_steps} steps to run")
    run_harness(run.workload, spec.schedule, dataset.samples, run.measured)
    progress.phase("done")
    run.moved = _weight_change(run.workload)
    run.workload.close()
    log(f"done: {run.measured.samples_done} samples, steady {run.measured.steady().throughput or 0:.1f} samples/s")


def execute(engine: Engine, spec: RunSpec, worker: WorkerInfo | None = None) -> tuple[EngineResult, int]:
    """Run ``spec`` on ``engine`` (as launched ``worker``, if any); return the result and the exit code."""
    result = base_result(engine, spec)
    run = _Run(base_environment(engine))
    code = 0
    try:
        _steps(engine, spec, worker, run)
    except BaseException as exc:
        failure, code = _failure(engine, exc)
        result = failed(result, failure)
    result = replace(result, environment=as_json(run.environment))
    if run.workload is not None:
        measurements = run.measured.result(run.setup_s, run.workload.peak_memory_bytes(), run.setup_parts,
                                           run.workload.memory_limit_bytes())
        if worker is None:  # a worker keeps every window: the launcher merges them, then caps
            measurements = measurements.capped(spec.measurement.max_step_samples)
        work = _work(spec, run.workload, run.dataset, run.measured, run.moved)
        result = replace(result, work=work.to_json(), measurements=measurements)
    if worker is not None:
        result = replace(result, extra={WORKER_KEY: {"rank": worker.rank, "world_size": worker.world_size, "start_wall": _START_WALL}})
    return result, code


def read_command_line(prog: str, argv: list[str] | None = None) -> tuple[argparse.Namespace, RunSpec | None]:
    """The entrypoint's ``--spec``/``--result`` arguments and the spec, parsed once (None, said in one line: unreadable).

    A shared initial-weights file the spec names relative to its folder is made absolute."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--spec", required=True, type=Path, help="run-spec JSON")
    parser.add_argument("--result", required=True, type=Path, help="where to write the engine-result JSON")
    args = parser.parse_args(argv)
    try:
        doc = json.loads(args.spec.read_text())
        if not isinstance(doc, dict) or doc.get("schema_version") != 1 or "parity" not in doc:
            raise ValueError("not a bench run spec (schema_version 1)")
        spec = RunSpec.from_json(doc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        log(f"cannot read spec {args.spec}: {reason}")
        return args, None
    return args, spec.with_init_relative_to(args.spec.resolve().parent)


def run_engine(engine: Engine, argv: list[str] | None = None) -> int:
    """Parse the command line, run the spec, write the result; return the process exit code."""
    args, spec = read_command_line(f"bench-engine-{engine.name}", argv)
    if spec is None:
        return 2
    signal.signal(signal.SIGTERM, _on_sigterm)
    enable_stack_dumps()
    tie_to_parent()  # SIGTERM when bench (or the launcher) dies, even by SIGKILL
    worker = worker_info()
    if worker is None and engine.processes(spec) > 1:  # the launcher: its workers say their phases
        result, code = launch(engine, spec, args.spec.resolve(), args.result.resolve())
    elif worker is not None:  # the launcher watches its workers
        progress.phase("setup")
        result, code = execute(engine, spec, worker)
        if code != 0:
            # A failed rank leaves its process group with collectives a peer may still wait on: the
            # interpreter's exit could block in the communicator's teardown. The document is all the
            # launcher needs, so write it and leave at once.
            write_json_atomic(args.result, result.to_json())
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    else:
        progress.phase("setup")
        bounds = progress.stall_bounds(spec.measurement)
        watch = SelfWatch(progress.current(), *bounds, on_stall=_stalled_writer(engine, spec, args.result)).start()
        try:
            result, code = execute(engine, spec, None)
        finally:
            watch.stop()
    write_json_atomic(args.result, result.to_json())
    return code


def _stalled_writer(engine: Engine, spec: RunSpec, path: Path) -> Callable[[str], None]:
    """What a single process's watchdog does on a stall: write the failed result (kind ``stalled``)."""

    def write(message: str) -> None:
        write_json_atomic(path, failed(base_result(engine, spec), Failure("stalled", message)).to_json())
        log(f"failed (stalled): {message}")

    return write
