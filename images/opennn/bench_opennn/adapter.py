"""``python -m bench_opennn --spec SPEC.json --result RESULT.json``: run the C++ driver as a child.

Exit codes as every bench engine (bench_engine.main): 0 ok; 1 failed; 2 the spec could not be
read; 130 interrupted (SIGINT/SIGTERM, forwarded to the driver). A result file is written in
every case where the spec could be read. The driver's plan and events files stay in the run
folder (``opennn/``) as evidence; its output goes to the run log.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench_engine.contract import steady_of
from bench_engine.data import CANONICAL_FILES, DatasetError, split_sha256
from bench_engine.main import read_command_line
from bench_engine.result import ENGINE_LIB_VERSION, RESULT_SCHEMA_VERSION, cap_windows, write_json_atomic
from bench_engine.weights import WeightChange, weight_change
from bench_opennn.events import DriverEvents, parse_events
from bench_opennn.locate import DriverMissing, find_driver, sources
from bench_opennn.plan import Switches, UnsupportedSchedule, check_schedule, plan_text, resolve_switches

START = time.monotonic()
# the engine library that implements docs/engine-contract.md (read-back fields, shared init) ships
# bench_engine.initweights; its result schema has the fields _contract_fields writes
CONTRACT_READBACK = importlib.util.find_spec("bench_engine.initweights") is not None
GRACE_S = 10.0
EXIT_UNSUPPORTED = 3  # the driver's "cannot do what the plan asks"


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the adapter."""


def log(message: str) -> None:
    print(f"[bench-opennn] {message}", file=sys.stderr, flush=True)


def wants_cuda(spec: dict[str, Any]) -> bool:
    """cpu/cuda as asked; auto: CUDA when a CUDA driver is built and an NVIDIA device is present."""
    if spec["device"] != "auto":
        return spec["device"] == "cuda"
    if not Path("/dev/nvidiactl").exists():
        return False
    try:
        find_driver(True)
        return True
    except DriverMissing:
        return False


def check_dataset(spec: dict[str, Any]) -> tuple[Path, int]:
    """The split folder and its sample count; the hash is the one the spec names."""
    import numpy as np

    folder = Path(spec["parity"]["dataset"]["path"])
    for name in CANONICAL_FILES:
        if not (folder / name).is_file():
            raise DatasetError(f"dataset file missing: {folder / name}")
    sha = split_sha256(folder)
    if sha != spec["parity"]["dataset"]["sha256"]:
        raise DatasetError(f"dataset hash {sha[:12]} does not match the spec's {spec['parity']['dataset']['sha256'][:12]} ({folder})")
    return folder, int(np.load(folder / "labels.npy", mmap_mode="r").shape[0])


def _child_env(spec: dict[str, Any], cuda: bool, info: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    extra = info.get("ld_library_path", "-")
    if extra not in ("", "-"):
        env["LD_LIBRARY_PATH"] = extra + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if cuda and spec["parity"]["precision"] == "fp32":
        # strict fp32: OpenNN asks cuBLAS for TF32 and cuDNN computes FLOAT graphs on TF32 tensor
        # cores; NVIDIA's libraries honour this switch (the driver reads it back).
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


def _die_with_parent() -> None:
    """Child side of fork: the driver gets SIGKILL if the adapter dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def run_driver(driver: Path, plan: Path, env: dict[str, str]) -> int:
    """Run the driver to its end; SIGINT/SIGTERM stop it (TERM, then KILL after a grace period)."""
    child = subprocess.Popen([str(driver), str(plan)], env=env, preexec_fn=_die_with_parent)
    stop: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        stop.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                code = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if stop:
                    child.terminate()
                    try:
                        child.wait(timeout=GRACE_S)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                    raise Interrupted() from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop:
        raise Interrupted()
    return code


def environment(cuda: bool, driver: Path | None, info: dict[str, str], events: DriverEvents) -> dict[str, Any]:
    opennn = next(s for s in sources() if s.name == "opennn")
    gpu = events.applied.get("gpu")
    cuda_version = None
    if gpu and "CUDA " in gpu:
        cuda_version = gpu.rsplit("CUDA ", 1)[1].strip()
    return {
        "framework": "OpenNN",
        "framework_version": f"{opennn.commit[:8]} (dev branch, {opennn.upstream})",
        "python": platform.python_version(),
        "engine_version": ENGINE_LIB_VERSION,
        "cuda": cuda_version,
        "cudnn": None,
        "driver": None,
        "device_kind": "cuda" if cuda else "cpu",
        "devices": [gpu.split("  ")[0].strip()] if gpu else ([] if cuda else [platform.processor() or "cpu"]),
        "extra": {"driver": str(driver) if driver else None, "build": info,
                  "optimizer_json": events.applied.get("optimizer_json"), "regularization": events.applied.get("regularization")},
    }


def _precision(spec: dict[str, Any], cuda: bool, applied: dict[str, str]) -> dict[str, Any]:
    """bench's precision name for what OpenNN read back (parity then refuses a mismatch)."""
    training = applied.get("training_type", "float32")
    tf32_matmul, tf32_conv = applied.get("tf32_matmul") == "1", applied.get("tf32_conv") == "1"
    if training == "bfloat16":
        name = "bf16"
    elif cuda:
        name = "tf32" if (tf32_matmul or tf32_conv) else "fp32"
    else:  # TF32 does not exist on a CPU: OpenNN's float32 is what fp32 and tf32 both mean there
        name = spec["parity"]["precision"] if spec["parity"]["precision"] in ("fp32", "tf32") else "fp32"
    return {"name": name, "compute_dtype": applied.get("observed_compute_dtype", training),
            "param_dtype": applied.get("param_dtype", "float32"), "tf32_matmul": tf32_matmul, "tf32_conv": tf32_conv,
            "loss_scaling": False}


def _optimizations(switches: Switches, applied: dict[str, str], issued_steps: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    armed = applied.get("graph_update_armed") == "1"
    execs = applied.get("graph_execs", "?")
    out["cuda_graph"] = {"applied": switches.cuda_graph and armed and execs not in ("0", "?"),
                         "detail": f"{switches.notes.get('cuda_graph', '')}; update closure armed: {armed}; training graph execs: {execs}"}
    out["gpu_resident_data"] = {"applied": applied.get("gpu_resident") == "1",
                                "detail": f"Dataset storage mode {applied.get('storage_mode', '?')}"}
    if "conv_autotune" in applied:
        tuned = applied["conv_autotune"] == "1"
        cap = applied.get("conv_workspace_cap_bytes", "?")
        policy = "all built and timed (BuildPlanPolicy ALL)" if tuned and cap == "0" else "heuristic choice (HEURISTICS_CHOICE)"
        out["cudnn_autotune"] = {"applied": tuned and cap == "0",
                                 "detail": f"cuDNN frontend plans: {policy}; workspace cap {cap} bytes "
                                           f"(set_conv_autotune={switches.conv_autotune}, set_conv_workspace_cap={switches.conv_workspace_cap})"}
    warmup_s = applied.get("opennn_cuda_warmup_s", "0")
    out["opennn_cuda_warmup"] = {"applied": switches.opennn_cuda_warmup and float(warmup_s) > 0,
                                 "detail": f"Optimizer::warmup_device_training, one step, weights restored, in setup: {warmup_s} s"}
    out["reset_graphs_after_warmup"] = {"applied": switches.reset_graphs_after_warmup,
                                        "detail": "drop the warmup's one-step graph before timing (Optimizer::train keeps it)"}
    steps = applied.get("steps_applied", "-1")
    if steps not in ("-1", ""):
        out["optimizer_steps"] = {"applied": int(steps) == issued_steps,
                                  "detail": f"Adam updates read back from OpenNN: {steps} for {issued_steps} steps issued"}
    buffer, trainable = applied.get("parameter_buffer_floats"), applied.get("trainable_parameters")
    if buffer and trainable:
        padding = int(buffer) - int(trainable)
        out["parameter_buffer"] = {"applied": True, "detail": f"{buffer} floats = {trainable} parameters + {padding} alignment padding "
                                                             f"({applied.get('parameter_tensors', '?')} tensors, each 64-byte aligned)"}
    return out


def _optimizer_readback(spec: dict[str, Any], applied: dict[str, str]) -> dict[str, Any] | None:
    """docs/engine-contract.md's ``optimizer``, from OpenNN's objects: lr (and Adam's eps, the constant
    EPSILON) from the driver, betas / momentum from OpenNN's own to_JSON, weight decay from the loss's
    regularisation (L2 weight, 0 when none)."""
    values = applied.get("optimizer_values", "").split()
    numbers = dict(zip(values[::2], (float(v) for v in values[1::2]), strict=False))
    if "lr" not in numbers:
        return None  # the driver stopped before it built the optimizer
    try:
        serialised = json.loads(applied.get("optimizer_json") or "{}")
    except ValueError:
        serialised = {}
    name = spec["parity"]["optimizer"]["name"]
    decay = float(spec["parity"]["optimizer"].get("weight_decay") or 0.0) if applied.get("regularization") == "L2" else 0.0
    if "AdaptiveMomentEstimation" in serialised:
        adam = serialised["AdaptiveMomentEstimation"]
        return {"name": "adam", "class": "opennn::AdaptiveMomentEstimation", "lr": numbers.get("lr"), "weight_decay": decay,
                "momentum": None, "nesterov": None, "betas": [float(adam["Beta1"]), float(adam["Beta2"])], "eps": numbers.get("eps")}
    if "StochasticGradientDescent" in serialised:
        sgd = serialised["StochasticGradientDescent"]
        return {"name": "sgd", "class": "opennn::StochasticGradientDescent", "lr": numbers.get("lr"), "weight_decay": decay,
                "momentum": float(sgd.get("Momentum", "nan")), "nesterov": sgd.get("Nesterov") in ("1", "true", "True"),
                "betas": None, "eps": None}
    return {"name": name, "class": "unknown", "lr": numbers.get("lr"), "weight_decay": decay, "momentum": None, "nesterov": None,
            "betas": None, "eps": None}


def _contract_fields(spec: dict[str, Any], events: DriverEvents, work: dict[str, Any], measurements: dict[str, Any],
                     init_sha: str | None) -> None:
    """The read-back fields of docs/engine-contract.md, for specs that carry ``parity.init`` (its schema)."""
    applied = events.applied
    work["param_dtypes"] = [applied.get("param_dtype", "float32")]
    # OpenNN's gradient buffer is the fp32 master (BackPropagation::gradient, Type::FP32) in every precision
    work["observed"] = {"compute_dtype": applied.get("observed_compute_dtype", "float32"), "grad_dtype": "float32",
                        "logits_dtype": applied.get("logits_dtype", "float32")}
    work["optimizer"] = _optimizer_readback(spec, applied)
    work["loss"] = {"name": "cross_entropy" if applied.get("loss") == "CrossEntropy" else applied.get("loss", "?"),
                    "class": "opennn::Loss(Error::CrossEntropy)", "reduction": "mean", "label_smoothing": 0.0}
    # shared: the hash of the weights read back from OpenNN after loading; else OpenNN's own initialiser
    work["init"] = {"mode": "shared", "sha256": init_sha} if init_sha else {"mode": "framework", "sha256": None}
    work["steps_per_dispatch"] = 1
    # per-step losses exist only where a block is one step (OpenNN averages a block's losses)
    first = []
    for block in events.blocks:
        if block["steps"] != 1 or block["loss"] is None or len(first) >= 20:
            break
        first.append(block["loss"])
    total = sum(b["steps"] for b in events.blocks)
    measurements["losses"] = first if len(first) == min(20, total) else []


def block_losses(events: DriverEvents) -> list[float]:
    """The mean training loss of each block the driver ran, in order (NaN where the driver wrote a non-finite one).

    The driver's block loss is ``Loss::EvaluationResult::error`` of ``Optimizer::train_epoch`` over the
    block's batches: each step's error summed and divided by the number of steps (``average_epoch_metrics``)
    on the host loop, the device loop and the CUDA-graph epoch alike; the L2 term is not in it, as in the
    other engines' losses. So it is the block mean the contract asks for, over the harness's blocks
    (bench_opennn.plan writes bench_engine.harness.timing_blocks).
    """
    return [math.nan if block["loss"] is None else float(block["loss"]) for block in events.blocks]


def assemble(result: dict[str, Any], spec: dict[str, Any], events: DriverEvents, cuda: bool, switches: Switches | None,
             dataset: tuple[str, int] | None, stopped_at: float, init_sha: str | None = None) -> None:
    """Merge the driver's events into ``result`` (work and measurements, as far as they got)."""
    applied = events.applied
    if "trainable_parameters" not in applied or switches is None or dataset is None:
        return
    parity = spec["parity"]
    issued_steps = sum(b["steps"] for b in events.blocks)
    steps_applied = int(applied.get("steps_applied", "-1") or -1)
    shape = [int(x) for x in applied.get("input_shape", "0,0,0").split(",")]
    resident = applied.get("gpu_resident") == "1"
    result["work"] = {
        "mode": parity["mode"], "arch": parity["model"]["arch"], "num_classes": int(applied.get("num_classes", 0)),
        "input_shape": shape, "trainable_parameters": int(applied["trainable_parameters"]),
        "dataset_sha256": dataset[0], "dataset_samples": dataset[1],
        "batch_per_device": parity["batch"]["per_device"], "batch_global": parity["batch"]["per_device"], "world_size": 1,
        "drop_last": parity["batch"]["drop_last"], "epochs": len(events.epochs),
        # counted by OpenNN's optimizer where it keeps a count (Adam), else by the loop
        "steps": steps_applied if steps_applied >= 0 else issued_steps,
        "samples": sum(b["samples"] for b in events.blocks),
        "data_placement": "device" if (resident or not cuda) else "host",
        "precision": _precision(spec, cuda, applied),
        "optimizations": _optimizations(switches, applied, issued_steps),
    }
    warm = [b for b in events.blocks if b["warmup"]]
    windows = [[b["steps"], b["samples"], b["seconds"]] for b in events.blocks if not b["warmup"]]
    losses = [b["loss"] for b in events.blocks if b["loss"] is not None]
    setup_end = events.setup_done if events.setup_done is not None else stopped_at
    result["measurements"] = {
        "setup_s": max(0.0, setup_end - START), "warmup_s": sum(b["seconds"] for b in warm),
        "warmup_steps": sum(b["steps"] for b in warm), "epochs": events.epochs, "steady": steady_of(windows),
        "windows": windows, "peak_memory_bytes": None,
        "final_loss": events.final_loss if events.done else (losses[-1] if losses else None),
        "loss_first": losses[0] if losses else None,
    }
    if parity["mode"] == "train":
        result["measurements"]["block_losses"] = block_losses(events)
    cap_windows(result["measurements"], spec["measurement"]["max_step_samples"])
    if "init" in parity or CONTRACT_READBACK:
        _contract_fields(spec, events, result["work"], result["measurements"], init_sha)


def _failure(result: dict[str, Any], kind: str, message: str) -> None:
    result["status"] = "failed"
    result["failure"] = {"kind": kind, "message": message[:2000]}
    log(f"failed ({kind}): {message[:300]}")


def shared_init(spec: dict[str, Any], spec_dir: Path, driver: Path, env: dict[str, str], plan_base: str, work_dir: Path) -> tuple[dict, list]:
    """First pass for ``init: shared``: the driver reports OpenNN's buffer layout and its default
    buffers; the file's tensors are written into them. Returns the plan keys of the second pass."""
    from bench_engine.initweights import read_init, resolve_init  # the contract's reader (bench_engine >= parity read-back)
    from bench_opennn.initload import fill, raw

    tensors, _ = read_init(resolve_init(spec, spec_dir))
    files = {key: work_dir / f"{key}.f32" for key in ("defaults_params", "defaults_states", "init_params", "init_states",
                                                      "readback_params", "readback_states", "final_params", "final_states")}
    layout_events = work_dir / "layout-events.txt"
    layout_plan = work_dir / "layout-plan.txt"
    layout_plan.write_text(plan_base.replace(f"events {work_dir / 'events.txt'}", f"events {layout_events}", 1)
                           + f"layout_only 1\ndump_params {files['defaults_params']}\ndump_states {files['defaults_states']}\n")
    if run_driver(driver, layout_plan, env) != 0:
        found = parse_events(layout_events)
        raise RuntimeError(f"OpenNN driver, layout pass: {found.error_message or 'failed (see the run log)'}")
    layout = parse_events(layout_events).layout
    params, states = raw(files["defaults_params"]), raw(files["defaults_states"])
    fill(layout, tensors, params, states)
    params.tofile(files["init_params"])
    states.tofile(files["init_states"])
    keys = {"init_params": files["init_params"], "init_states": files["init_states"],
            "dump_params": files["readback_params"], "dump_states": files["readback_states"],
            "final_params": files["final_params"], "final_states": files["final_states"]}
    return keys, layout


def init_readback(layout: list, keys: dict) -> str:
    """Canonical hash (docs/engine-contract.md 3.3) of the weights OpenNN held after loading."""
    from bench_engine.initweights import canonical_sha256
    from bench_opennn.initload import raw, read_back

    return canonical_sha256(read_back(layout, raw(keys["dump_params"]), raw(keys["dump_states"])))


def moved_weights(layout: list, keys: dict) -> WeightChange:
    """How far training moved the trainable parameters: the driver's dump after the last step
    against its dump after loading (the parameter tensors of ``layout``; padding excluded)."""
    from bench_opennn.initload import raw

    before, after = raw(keys["dump_params"]), raw(keys["final_params"])
    slots = [(offset, int(np.prod(shape))) for kind, _label, _index, offset, shape in layout if kind == "param"]
    return weight_change((before[o : o + n] for o, n in slots), (after[o : o + n] for o, n in slots))


def execute(spec: dict[str, Any], result_path: Path, spec_dir: Path | None = None) -> tuple[dict[str, Any], int]:
    """Run ``spec``; return the engine-result document and the exit code."""
    result: dict[str, Any] = {"schema_version": RESULT_SCHEMA_VERSION, "run_id": spec["run_id"], "engine": spec["engine"], "status": "ok"}
    cuda = wants_cuda(spec)
    driver, info, switches, dataset = None, {}, None, None
    init_sha, moved = None, None
    events = DriverEvents()
    code = 0
    work_dir = result_path.parent / "opennn"
    try:
        driver, info = find_driver(cuda)
        folder, samples = check_dataset(spec)
        dataset = (spec["parity"]["dataset"]["sha256"], samples)
        switches = resolve_switches(spec, cuda)
        check_schedule(spec, samples, switches)
        work_dir.mkdir(parents=True, exist_ok=True)
        events_path = work_dir / "events.txt"
        events_path.unlink(missing_ok=True)
        plan = work_dir / "plan.txt"
        env = _child_env(spec, cuda, info)
        init_keys, layout = {}, []
        if (spec["parity"].get("init") or {}).get("mode") == "shared":
            try:
                init_keys, layout = shared_init(spec, spec_dir or result_path.parent, driver, env,
                                                plan_text(spec, folder, samples, cuda, switches, events_path), work_dir)
            except Interrupted:
                raise
            except Exception as exc:  # a bad file, or weights that do not fit OpenNN's ResNet
                raise DatasetError(f"initial weights: {exc}") from None
        plan.write_text(plan_text(spec, folder, samples, cuda, switches, events_path, init_keys))
        log(f"driver {driver} ({'cuda' if cuda else 'cpu'}), plan {plan}")
        returncode = run_driver(driver, plan, env)
        if layout and events_path.is_file() and "applied init shared" in events_path.read_text():
            init_sha = init_readback(layout, init_keys)
        events = parse_events(events_path)
        if layout and events.applied.get("final_dumped") == "1":
            try:
                moved = moved_weights(layout, init_keys)
            except (OSError, ValueError) as exc:  # a cut-off dump: the run keeps its result, without this signal
                log(f"weight change not measured: {exc}")
        if returncode == 0 and events.done:
            pass
        elif events.error_kind:
            _failure(result, events.error_kind if events.error_kind in ("oom", "unsupported", "crash") else "crash", events.error_message or "")
        elif returncode < 0:
            _failure(result, "crash", f"the OpenNN driver was killed by {signal.Signals(-returncode).name}")
        else:
            _failure(result, "unsupported" if returncode == EXIT_UNSUPPORTED else "crash", f"the OpenNN driver exited with code {returncode} (see the run log)")
    except DriverMissing as exc:
        _failure(result, "unsupported", str(exc))
    except DatasetError as exc:
        _failure(result, "bad_spec", str(exc))
    except Interrupted:
        events = parse_events(work_dir / "events.txt")
        _failure(result, "interrupted", "terminated by signal")
        code = 130
    except OSError as exc:
        _failure(result, "crash", f"cannot run the OpenNN driver: {exc}")
    except UnsupportedSchedule as exc:
        _failure(result, "unsupported", str(exc))
    except ValueError as exc:  # the schedule does not fit the dataset (bench_engine.harness)
        _failure(result, "bad_spec", str(exc))
    except Exception as exc:  # any fault still leaves a valid result
        _failure(result, "crash", f"{type(exc).__name__}: {exc}")
    if result["status"] != "ok" and code == 0:
        code = 1
    result["environment"] = environment(cuda, driver, info, events)
    assemble(result, spec, events, cuda, switches, dataset, time.monotonic(), init_sha)
    if moved is not None and "work" in result:
        result["work"]["weight_change"] = moved.to_json()
    for dump in work_dir.glob("*.f32"):  # raw parameter buffers (94 MB each for ResNet-50), read: not results
        dump.unlink(missing_ok=True)
    return result, code


def _interrupt(signum: int, frame: Any) -> None:
    raise Interrupted()


def main(argv: list[str] | None = None) -> int:
    args, spec = read_command_line("bench-engine-opennn", argv)
    if spec is None:
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    result, code = execute(spec, args.result.resolve(), args.spec.resolve().parent)
    write_json_atomic(args.result, result)
    return code
