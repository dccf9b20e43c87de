"""``python -m bench_opennn --spec SPEC.json --result RESULT.json``: run the C++ driver as a child.

Exit codes as every bench engine (bench_engine.main): 0 ok; 1 failed; 2 the spec could not be
read; 130 interrupted (SIGINT/SIGTERM, forwarded to the driver). A result file is written in
every case where the spec could be read. The driver's plan and events files stay in the run
folder (``opennn/``) as evidence; its output goes to the run log. The jobs live beside this module:
running the child (bench_opennn.child), the shared initial weights (bench_opennn.sharedinit), the
result's blocks from the driver's events (bench_opennn.results).
"""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

import numpy as np

from bench_engine import progress
from bench_engine.contract import EngineResult, RunSpec
from bench_engine.data import CANONICAL_FILES, DatasetError, split_sha256
from bench_engine.main import read_command_line
from bench_engine.report import Failure, as_json
from bench_engine.result import RESULT_SCHEMA_VERSION, write_json_atomic
from bench_engine.weights import WeightChange
from bench_opennn import results
from bench_opennn.child import EXIT_UNSUPPORTED, Interrupted, child_env, run_driver
from bench_opennn.events import DriverEvents, parse_events
from bench_opennn.initload import Layout
from bench_opennn.locate import DriverMissing, find_driver
from bench_opennn.phases import POLL_S, EventPhases
from bench_opennn.plan import Switches, UnsupportedSchedule, check_schedule, phase_steps, plan_text, resolve_switches
from bench_opennn.sharedinit import init_readback, moved_weights, shared_init

START = time.monotonic()


def log(message: str) -> None:
    print(f"[bench-opennn] {message}", file=sys.stderr, flush=True)


def wants_cuda(spec: RunSpec) -> bool:
    """cpu/cuda as asked; auto: CUDA when a CUDA driver is built and an NVIDIA device is present."""
    if spec.device != "auto":
        return spec.device == "cuda"
    if not Path("/dev/nvidiactl").exists():
        return False
    try:
        find_driver(True)
        return True
    except DriverMissing:
        return False


def check_dataset(spec: RunSpec) -> tuple[Path, int]:
    """The split folder and its sample count; the hash is the one the spec names."""
    folder = Path(spec.parity.dataset.path)
    for name in CANONICAL_FILES:
        if not (folder / name).is_file():
            raise DatasetError(f"dataset file missing: {folder / name}")
    sha = split_sha256(folder)
    if sha != spec.parity.dataset.sha256:
        raise DatasetError(f"dataset hash {sha[:12]} does not match the spec's {spec.parity.dataset.sha256[:12]} ({folder})")
    return folder, int(np.load(folder / "labels.npy", mmap_mode="r").shape[0])


@dataclass
class _Run:
    """What a run got to, kept as it goes so that a failure still reports it."""

    cuda: bool
    driver: Path | None = None
    info: dict[str, str] = field(default_factory=dict)
    switches: Switches | None = None
    dataset: tuple[str, int] | None = None
    init_sha: str | None = None
    moved: WeightChange | None = None
    events: DriverEvents = field(default_factory=DriverEvents)
    failure: Failure | None = None


def _fail(run: _Run, kind: str, message: str) -> None:
    run.failure = Failure(kind, message[:2000])
    log(f"failed ({kind}): {message[:300]}")


def _drive(spec: RunSpec, run: _Run, work_dir: Path, spec_dir: Path) -> None:
    """Everything a run does: find the driver, check the data and the schedule, run the plan (after the
    shared weights' layout pass), read the events."""
    progress.phase("setup")
    run.driver, run.info = find_driver(run.cuda)
    folder, samples = check_dataset(spec)
    run.dataset = (spec.parity.dataset.sha256, samples)
    run.switches = switches = resolve_switches(spec, run.cuda)
    check_schedule(spec, samples, switches)
    work_dir.mkdir(parents=True, exist_ok=True)
    events_path = work_dir / "events.txt"
    events_path.unlink(missing_ok=True)
    plan = work_dir / "plan.txt"
    env = child_env(spec, run.cuda, run.info)
    init_keys: dict[str, Path] = {}
    layout: Layout = []
    if spec.init_file() is not None:
        try:
            init_keys, layout = shared_init(spec, spec_dir, run.driver, env,
                                            plan_text(spec, folder, samples, run.cuda, switches, events_path), work_dir)
        except Interrupted:
            raise
        except Exception as exc:  # a bad file, or weights that do not fit OpenNN's ResNet
            raise DatasetError(f"initial weights: {exc}") from None
    plan.write_text(plan_text(spec, folder, samples, run.cuda, switches, events_path, init_keys))
    log(f"driver {run.driver} ({'cuda' if run.cuda else 'cpu'}), plan {plan}")
    phases = EventPhases(events_path, *phase_steps(spec, samples))  # the phase lines, from the events as they come
    returncode = run_driver(run.driver, plan, env, on_tick=phases.poll, tick_s=POLL_S)
    if layout and events_path.is_file() and "applied init shared" in events_path.read_text():
        run.init_sha = init_readback(layout, init_keys)
    run.events = events = parse_events(events_path)
    if layout and events.applied.get("final_dumped") == "1":
        try:
            run.moved = moved_weights(layout, init_keys)
        except (OSError, ValueError) as exc:  # a cut-off dump: the run keeps its result, without this signal
            log(f"weight change not measured: {exc}")
    if returncode == 0 and events.done:
        return
    if events.error_kind:
        _fail(run, events.error_kind if events.error_kind in ("oom", "unsupported", "crash") else "crash", events.error_message or "")
    elif returncode < 0:
        _fail(run, "crash", f"the OpenNN driver was killed by {signal.Signals(-returncode).name}")
    else:
        _fail(run, "unsupported" if returncode == EXIT_UNSUPPORTED else "crash", f"the OpenNN driver exited with code {returncode} (see the run log)")


def _caught(run: _Run, exc: Exception, work_dir: Path) -> int:
    """Record ``exc`` as the run's failure; the exit code it means."""
    if isinstance(exc, Interrupted):
        run.events = parse_events(work_dir / "events.txt")
        _fail(run, "interrupted", "terminated by signal")
        return 130
    if isinstance(exc, DriverMissing | UnsupportedSchedule):
        _fail(run, "unsupported", str(exc))
    elif isinstance(exc, DatasetError):
        _fail(run, "bad_spec", str(exc))
    elif isinstance(exc, OSError):
        _fail(run, "crash", f"cannot run the OpenNN driver: {exc}")
    elif isinstance(exc, ValueError):  # the schedule does not fit the dataset (bench_engine.harness)
        _fail(run, "bad_spec", str(exc))
    else:  # any fault still leaves a valid result
        _fail(run, "crash", f"{type(exc).__name__}: {exc}")
    return 1


def execute(spec: RunSpec, result_path: Path, spec_dir: Path | None = None) -> tuple[EngineResult, int]:
    """Run ``spec``; return the engine result and the exit code."""
    run = _Run(cuda=wants_cuda(spec))
    work_dir = result_path.parent / "opennn"
    code = 0
    try:
        _drive(spec, run, work_dir, spec_dir or result_path.parent)
    except Exception as exc:
        code = _caught(run, exc, work_dir)
    if run.failure is not None and code == 0:
        code = 1
    result = EngineResult(RESULT_SCHEMA_VERSION, spec.run_id, spec.engine, "ok" if run.failure is None else "failed",
                          as_json(results.environment(run.cuda, run.driver, run.info, run.events)),
                          failure=as_json(run.failure) if run.failure is not None else None)
    if "trainable_parameters" in run.events.applied and run.switches is not None and run.dataset is not None:
        work = replace(results.work(spec, run.events, run.cuda, run.switches, run.dataset, run.init_sha), weight_change=run.moved)
        setup_end = run.events.setup_done if run.events.setup_done is not None else time.monotonic()
        result = replace(result, work=work.to_json(), measurements=results.measurements(spec, run.events, max(0.0, setup_end - START)))
    for dump in work_dir.glob("*.f32"):  # raw parameter buffers (94 MB each for ResNet-50), read: not results
        dump.unlink(missing_ok=True)
    return result, code


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted()


def main(argv: list[str] | None = None) -> int:
    args, spec = read_command_line("bench-engine-opennn", argv)
    if spec is None:
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    result, code = execute(spec, args.result.resolve(), args.spec.resolve().parent)
    write_json_atomic(args.result, result.to_json())
    return code
