"""The engine entrypoint: ``<engine> --spec SPEC.json --result RESULT.json``.

Exit codes: 0 the result says ok; 1 the result says failed; 2 the spec could not be read;
130 interrupted (SIGINT or SIGTERM). A result file is written in every case where the spec
could be read, atomically, so the orchestrator never sees half a file.

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
from pathlib import Path
from typing import Any

from bench_engine import progress
from bench_engine.api import Engine, UnsupportedError
from bench_engine.data import DatasetError, load_dataset
from bench_engine.harness import Measurements, run_harness
from bench_engine.initweights import InitError
from bench_engine.launch import WORKER_KEY, WorkerInfo, inject_fault, launch, worker_info
from bench_engine.lifeline import tie_to_parent
from bench_engine.result import base_result, cap_windows, log, write_json_atomic
from bench_engine.watch import SelfWatch, enable_stack_dumps
from bench_engine.weights import WeightChange

_START = time.perf_counter()
_START_WALL = time.time()


class _Terminated(KeyboardInterrupt):
    """SIGTERM turned into an interrupt so the result is still written."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


READBACK_KEYS = ("mode", "arch", "num_classes", "input_shape", "param_dtypes", "observed", "optimizer", "loss", "init",
                 "steps_per_dispatch")


def _work(spec: dict[str, Any], workload: Any, dataset_sha: str, dataset_samples: int, measured: Measurements) -> dict[str, Any]:
    """What the engine did: read back from its objects (workload.readback) and counted by the loop, never copied
    from the spec; a field the engine cannot read back is left out (the schema or the parity check then says so)."""
    back = workload.readback
    world = workload.world_size
    # the batch the loop really issued; before any step (a failed run) the planned one, which no check reads
    batch_global = measured.batch_max or spec["parity"]["batch"]["per_device"] * world
    work: dict[str, Any] = {key: back[key] for key in READBACK_KEYS if back.get(key) is not None or key in ("optimizer", "loss")}
    work.update({
        "trainable_parameters": int(workload.trainable_parameters),
        "dataset_sha256": dataset_sha,
        "dataset_samples": dataset_samples,
        "batch_per_device": max(1, batch_global // world),
        "batch_global": batch_global,
        "world_size": world,
        "epochs": measured.epochs_done,
        "steps": measured.steps_done,
        "samples": measured.samples_done,
        "data_placement": workload.data_placement,
        "precision": workload.precision,
        "optimizations": workload.optimizations,
    })
    return work


def _measurements(setup_s: float, workload: Any, measured: Measurements) -> dict[str, Any]:
    out: dict[str, Any] = {
        "setup_s": setup_s,
        "warmup_s": measured.warmup_s,
        "warmup_steps": measured.warmup_steps,
        "epochs": measured.epochs,
        "steady": measured.steady(),
        "windows": measured.windows,
        "peak_memory_bytes": workload.peak_memory_bytes() if workload is not None else None,
        "final_loss": measured.final_loss,
        "loss_first": measured.loss_first,
        "losses": measured.losses,
    }
    if measured.block_losses:
        out["block_losses"] = measured.block_losses
    latency = measured.latency_ms()
    if latency:
        out["latency_ms"] = latency
    return out


def _weight_change(workload: Any) -> WeightChange | None:
    """The workload's weight change, or None when it cannot say (never a reason to fail a finished run)."""
    try:
        return workload.weight_change()
    except Exception as exc:
        log(f"weight change not measured: {type(exc).__name__}: {exc}")
        return None


def execute(engine: Engine, spec: dict[str, Any], worker: WorkerInfo | None = None) -> tuple[dict[str, Any], int]:
    """Run ``spec`` on ``engine`` (as launched ``worker``, if any); return the result document and the exit code."""
    result = base_result(engine, spec)
    workload = None
    measured = Measurements()
    dataset_sha = ""
    dataset_samples = 0
    setup_s = 0.0
    code = 0
    moved = None
    try:
        env = engine.environment(spec)
        result["environment"].update(env)
        # a worker memory-maps the split: every rank copies out only its own shard
        dataset = load_dataset(spec["parity"]["dataset"]["path"], spec["parity"]["dataset"]["sha256"], mmap=worker is not None)
        dataset_sha, dataset_samples = dataset.sha256, dataset.samples
        log(f"dataset {dataset_sha[:12]} ({dataset_samples} samples) loaded")
        workload = engine.prepare(spec, dataset)
        inject_fault(workload, worker)
        setup_s = time.perf_counter() - _START
        log(f"setup done in {setup_s:.2f}s; {spec['parity']['total_steps']} steps to run")
        run_harness(workload, spec, dataset_samples, measured)
        progress.phase("done")
        moved = _weight_change(workload)
        workload.close()
        steady = measured.steady()
        log(f"done: {measured.samples_done} samples, steady {steady['throughput'] or 0:.1f} samples/s")
    except KeyboardInterrupt as exc:
        result["status"] = "failed"
        result["failure"] = {"kind": "interrupted", "message": "terminated by signal" if isinstance(exc, _Terminated) else "interrupted"}
        code = 130
    except BaseException as exc:
        kind = "crash"
        if isinstance(exc, UnsupportedError):
            kind = "unsupported"
        elif isinstance(exc, (DatasetError, InitError)):
            kind = "bad_spec"
        elif engine.is_out_of_memory(exc):
            kind = "oom"
        result["status"] = "failed"
        result["failure"] = {
            "kind": kind,
            "message": f"{type(exc).__name__}: {exc}".strip()[:2000],
            "traceback": traceback.format_exc()[-8000:],
        }
        log(f"failed ({kind}): {result['failure']['message']}")
        code = 1
    if workload is not None:
        result["work"] = _work(spec, workload, dataset_sha, dataset_samples, measured)
        if moved is not None:
            result["work"]["weight_change"] = moved.to_json()
        result["measurements"] = _measurements(setup_s, workload, measured)
        if worker is None:  # a worker keeps every window: the launcher merges them, then caps
            cap_windows(result["measurements"], spec["measurement"]["max_step_samples"])
    if worker is not None:
        result[WORKER_KEY] = {"rank": worker.rank, "world_size": worker.world_size, "start_wall": _START_WALL}
    return result, code


def read_command_line(prog: str, argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, Any] | None]:
    """The entrypoint's ``--spec``/``--result`` arguments and the spec document (None, said in one line: unreadable)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--spec", required=True, type=Path, help="run-spec JSON")
    parser.add_argument("--result", required=True, type=Path, help="where to write the engine-result JSON")
    args = parser.parse_args(argv)
    try:
        spec = json.loads(args.spec.read_text())
        if spec.get("schema_version") != 1 or "parity" not in spec:
            raise ValueError("not a bench run spec (schema_version 1)")
    except (OSError, ValueError) as exc:
        log(f"cannot read spec {args.spec}: {exc}")
        return args, None
    return args, spec


def run_engine(engine: Engine, argv: list[str] | None = None) -> int:
    """Parse the command line, run the spec, write the result; return the process exit code."""
    args, spec = read_command_line(f"bench-engine-{engine.name}", argv)
    if spec is None:
        return 2
    init = spec["parity"].get("init") or {}
    if init.get("mode") == "shared" and not Path(init["file"]).is_absolute():  # relative to the spec's folder
        init["file"] = str(args.spec.resolve().parent / init["file"])
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
            write_json_atomic(args.result, result)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    else:
        progress.phase("setup")
        watch = SelfWatch(progress.current(), *progress.stall_bounds(spec), on_stall=_stalled_writer(engine, spec, args.result)).start()
        try:
            result, code = execute(engine, spec, None)
        finally:
            watch.stop()
    write_json_atomic(args.result, result)
    return code


def _stalled_writer(engine: Engine, spec: dict[str, Any], path: Path) -> Any:
    """What a single process's watchdog does on a stall: write the failed result (kind ``stalled``)."""

    def write(message: str) -> None:
        result = base_result(engine, spec)
        result["status"] = "failed"
        result["failure"] = {"kind": "stalled", "message": message}
        write_json_atomic(path, result)
        log(f"failed (stalled): {message}")

    return write
