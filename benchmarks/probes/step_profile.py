"""Where an engine's step spends its GPU time: kernel classes, launches per step and GPU idle between kernels.

Diagnostic probe (not a benchmark): reads a run folder's ``spec.json`` (made by ``bench scenario run``; its
dataset and ``init.safetensors`` are used as they are), builds the engine's own workload for it (PyTorch or
JAX, the spec's options: CUDA graphs, command buffers, steps per call as bench runs them), warms it up, then
runs ``--steps`` steps (whole calls) under CUPTI kernel tracing and prints one JSON object:

- ``step_wall_ms``: wall time per step of the traced steps (device synchronised at both ends);
- ``gpu_busy_ms_per_step``: the union of the kernels' intervals per step (overlapping kernels counted once),
  and ``gpu_idle_share``: the part of the traced span with no kernel running (launch gaps, host waits);
- ``launches_per_step`` and, per kernel class (convolution, GEMM, fusion/elementwise, optimizer, copy, other),
  GPU time, share and kernels per step; the same per kernel family (``families``: which library made the kernel,
  Inductor's reductions, pointwise, persistent reductions and templates, cuDNN, cuBLAS, ATen, XLA's fusions); the
  ``--top`` kernels by time, and ``kernels``: every kernel name with its time and calls per step, so that a profile
  can be classified again later (``python3 step_profile.py --reclassify FILE.jsonl``).

Inductor names its Triton kernels after the operations they fuse (``triton_poi_fused_..._convolution_backward_...``
is a pointwise kernel beside a convolution's backward, not a convolution): a name Inductor gave is classified by its
kind first (``triton_poi``/``triton_red``/``triton_per``: fusion/elementwise; a ``triton_tem`` template: convolution
when it fuses one, else GEMM). Until session 19 the convolution pattern came first, so the PyTorch profiles published
before counted such pointwise kernels as convolution time (their ``conv`` figures are upper bounds, their
fusion/elementwise lower bounds).

The tracer is torch.profiler's (CUPTI activity records every kernel of the process, the ones XLA launches
included, inside CUDA graphs too), read back from its Chrome trace: a JAX probe needs torch beside JAX.
It needs a CUDA GPU; nothing is asserted. ``--option KEY=VALUE`` (repeatable) changes an engine option of the
spec for the probe, e.g. ``steps_per_dispatch=1``: session 10 found CUPTI recording the kernels of JAX's multi-step
call (a while loop inside one command buffer) once per call, not once per step, so a JAX profile at
``steps_per_call`` > 1 under-counts the kernels of every step but one (its output then carries a ``warning``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

CLASSES = (
    ("convolution", re.compile(r"conv|cudnn|xmma|implicit_gemm|dgrad|wgrad|fprop|nhwc|winograd", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|cublas|sm90_.*mma|nvjet", re.I)),
    ("optimizer", re.compile(r"foreach|multi_tensor|sgd|adam", re.I)),
    ("copy", re.compile(r"copy|transpose|memcpy|memset", re.I)),
    ("fusion/elementwise", re.compile(r"triton|elementwise|reduce|fusion|batch_norm|bn_|loop_|input_|wrapped_", re.I)),
)


INDUCTOR_KERNEL = re.compile(r"^triton_(?P<kind>poi|red|per|tem)_")
INDUCTOR_FAMILIES = {"red": "inductor reduction", "poi": "inductor pointwise", "per": "inductor persistent reduction",
                     "tem": "inductor template"}
FAMILIES = (  # which library made a kernel that Inductor did not generate, the first pattern that matches
    ("cudnn", re.compile(r"cudnn|xmma|implicit_gemm|winograd", re.I)),
    ("cublas", re.compile(r"nvjet|cublas|gemm", re.I)),
    ("memcpy/memset", re.compile(r"^memcpy|^memset", re.I)),
    ("aten", re.compile(r"at::native|at::cuda|c10::", re.I)),
    ("xla fusion", re.compile(r"fusion|^loop_|^input_|^wrapped_", re.I)),
)


def classify(name: str) -> str:
    """The kernel class of a kernel name: an Inductor kernel's by its kind, any other's by the first pattern that matches."""
    inductor = INDUCTOR_KERNEL.match(name)
    if inductor is not None:
        if inductor["kind"] != "tem":
            return "fusion/elementwise"
        return "convolution" if "convolution" in name else "gemm"
    for label, pattern in CLASSES:
        if pattern.search(name):
            return label
    return "other"


def family(name: str) -> str:
    """Which library made a kernel: Inductor's by its kind (reduction, pointwise, persistent reduction, template),
    any other's by the first pattern of ``FAMILIES`` that matches. Beside ``classify``'s operation classes this splits
    what a compiler tuned from what a vendor library chose (session 20: max-autotune's gain is all in the first)."""
    inductor = INDUCTOR_KERNEL.match(name)
    if inductor is not None:
        return INDUCTOR_FAMILIES[inductor["kind"]]
    for label, pattern in FAMILIES:
        if pattern.search(name):
            return label
    return "other"


def busy_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals: overlapping kernels are counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def kernels_of_trace(trace: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(name, start us, duration us) of every GPU kernel of a Chrome trace (torch.profiler's export)."""
    out = []
    for event in trace.get("traceEvents", []):
        if event.get("ph") == "X" and event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            out.append((str(event.get("name", "")), float(event["ts"]), float(event.get("dur", 0.0))))
    return out


def summarise(kernels: list[tuple[str, float, float]], steps: int, wall_s: float, top: int) -> dict[str, Any]:
    """The per-step figures of ``kernels`` traced over ``steps`` steps in ``wall_s`` seconds."""
    if not kernels or steps <= 0:
        return {"error": "no kernel was traced"}
    span_us = max(ts + dur for _, ts, dur in kernels) - min(ts for _, ts, _ in kernels)
    busy = busy_us((ts, ts + dur) for _, ts, dur in kernels)
    per_name: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for name, _, dur in kernels:
        per_name[name][0] += dur
        per_name[name][1] += 1
    table = [(name, us / steps / 1e3, count / steps) for name, (us, count) in sorted(per_name.items(), key=lambda kv: -kv[1][0])]
    return {
        "steps": steps, "step_wall_ms": round(wall_s / steps * 1e3, 4),
        "gpu_busy_ms_per_step": round(busy / steps / 1e3, 4),
        "gpu_idle_share": round(1.0 - busy / span_us, 4) if span_us > 0 else 0.0,
        "kernel_sum_ms_per_step": round(sum(ms for _, ms, _ in table), 4),
        "launches_per_step": round(len(kernels) / steps, 1),
        "classes": grouped(table, classify), "families": grouped(table, family),
        "top_kernels": [{"name": name[:120], "ms_per_step": round(ms, 4), "calls_per_step": round(calls, 2)}
                        for name, ms, calls in table[:top]],
        "kernels": [[name, round(ms, 5), round(calls, 2)] for name, ms, calls in table],
    }


def grouped(kernels: Iterable[tuple[str, float, float]], key: Callable[[str], str]) -> dict[str, dict[str, float]]:
    """``(name, ms per step, calls per step)`` kernels grouped by ``key(name)``: per group its ms and kernels per
    step and its share of the kernel time, the longest first (a profile's ``classes`` and ``families``)."""
    per_group: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, ms, calls in kernels:
        totals = per_group[key(name)]
        totals[0] += ms
        totals[1] += calls
    summed = sum(ms for ms, _ in per_group.values())
    return {label: {"ms_per_step": round(ms, 4), "share": round(ms / summed, 4) if summed else 0.0, "kernels_per_step": round(count, 1)}
            for label, (ms, count) in sorted(per_group.items(), key=lambda kv: -kv[1][0])}


def reclassify(profile: dict[str, Any]) -> dict[str, Any]:
    """``profile`` with its ``classes`` and ``families`` computed again from its ``kernels`` (by this version's
    ``classify`` and ``family``); a profile without them (written before session 19) is returned as it is, with a note."""
    if "classes" not in profile:  # another line of a profile's log (an autotune choice)
        return profile
    if not profile.get("kernels"):
        return {**profile, "note": "no kernels table (a profile written before session 19): its classes stay as written"}
    return {**profile, "classes": grouped(profile["kernels"], classify), "families": grouped(profile["kernels"], family)}


def loop_trace_warning(engine: str, steps_per_call: int) -> str | None:
    """The caveat of a profile whose calls run several steps in one device loop (JAX's ``steps_per_dispatch``)."""
    if engine != "jax" or steps_per_call <= 1:
        return None
    return (f"{steps_per_call} steps per call: CUPTI records the kernels of the call's loop body once per call (session 10,"
            f" H200, jaxlib 0.11: kernel time {1 / steps_per_call:.2g}x that at one step per call), so the per-step kernel,"
            " launch and idle figures are not the step's; profile with --option steps_per_dispatch=1")


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--option``, the value read as YAML (``1`` an int, ``false`` a bool)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--option {text!r}: expected KEY=VALUE")
    return key.strip(), yaml.safe_load(value)


def _build(spec_path: Path, options: dict[str, Any]) -> tuple[Any, Any]:
    """(workload, spec) of the run folder's spec with ``options`` over its engine options, as its engine builds it."""
    from run_folder import read_spec, with_options

    from bench_engine.data import load_dataset

    spec = with_options(read_spec(spec_path), options) if options else read_spec(spec_path)
    if spec.engine == "jax":
        from run_folder import build_jax_workload

        return build_jax_workload(spec)[0], spec
    if spec.engine == "pytorch":
        from bench_pytorch.environment import run_device
        from bench_pytorch.workload import build_workload

        data = load_dataset(spec.parity.dataset.path, spec.parity.dataset.sha256)
        return build_workload(spec, data, run_device(spec)), spec
    raise SystemExit(f"{spec_path}: engine {spec.engine!r} is not profiled by this probe (pytorch, jax)")


def issue_steps(workload: Any, steps: int, k: int, per_epoch: int, batch: int, counter: int) -> int:
    """Hand ``workload`` ``steps`` batches (a multiple of ``k``), one ``step`` call each, as the harness does: an
    engine that runs ``k`` steps per call queues them and dispatches every ``k``-th; each call's batches lie inside
    one epoch. Returns the step counter after them. (Session 4's JAX profile handed one batch per ``k`` steps and
    so ran a tenth of the steps it divided by.)"""
    from bench_engine.api import StepBatch

    for _ in range(steps // k):
        index = counter % per_epoch
        if index + k > per_epoch:
            counter += per_epoch - index
            index = 0
        for offset in range(k):
            workload.step(StepBatch(epoch=counter // per_epoch, index=index + offset, start=(index + offset) * batch, size=batch))
        counter += k
    return counter


def profile(spec_path: Path, steps: int, warmup: int, top: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile


    workload, spec = _build(spec_path, options or {})
    batch, per_epoch = spec.parity.batch.global_, spec.parity.steps_per_epoch
    k = max(1, int(getattr(workload, "steps_per_dispatch", 1) or 1))
    steps = max(k, steps - steps % k)
    counter = 0

    def run(n: int) -> None:
        nonlocal counter
        counter = issue_steps(workload, n, k, per_epoch, batch, counter)

    run(max(k, warmup - warmup % k))
    workload.sync()
    # without a GPU the CPU is traced instead: the probe's path runs, and no kernel is reported
    activity = ProfilerActivity.CUDA if torch.cuda.is_available() else ProfilerActivity.CPU
    with torch_profile(activities=[activity]) as prof:
        started = time.perf_counter()
        run(steps)
        workload.sync()
        wall = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        kernels = kernels_of_trace(json.loads(path.read_text()))
    out = {"engine": spec.engine, "precision": spec.parity.precision, "mode": spec.parity.mode,
           "geometry": "x".join(map(str, spec.parity.input.hwc)), "batch": batch, "steps_per_call": k,
           "images_per_s": round(batch * steps / wall, 1), **summarise(kernels, steps, wall, top),
           "engine_options": dict(spec.engine_options), "torch": torch.__version__}
    warning = loop_trace_warning(spec.engine, k)
    if warning:
        out["warning"] = warning
        print(f"warning: {warning}", file=sys.stderr)
    if spec.engine == "jax":
        import jax

        out["jax"] = jax.__version__
        out["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    workload.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, nargs="?", help="a run folder's spec.json")
    parser.add_argument("--reclassify", type=Path, metavar="FILE.jsonl",
                        help="print the profiles of FILE.jsonl with their classes computed again from their kernels (no GPU)")
    parser.add_argument("--steps", type=int, default=50, help="traced steps (rounded to whole calls)")
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--option", type=parse_option, action="append", default=[], metavar="KEY=VALUE",
                        help="an engine option over the spec's (repeatable), e.g. steps_per_dispatch=1")
    args = parser.parse_args(argv)
    if args.reclassify is not None:
        try:
            profiles = [json.loads(line) for line in args.reclassify.read_text().splitlines() if line.strip()]
            if not all(isinstance(p, dict) for p in profiles):
                raise ValueError("a line is not a JSON object")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            parser.error(f"--reclassify {args.reclassify}: {exc}")
        for found in profiles:
            print(json.dumps(reclassify(found)))
        return 0
    if args.spec is None:
        parser.error("a spec.json (or --reclassify FILE.jsonl) is needed")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave torch's CUPTI room beside JAX
    from run_folder import use_bench_compile_caches

    use_bench_compile_caches()
    print(json.dumps(profile(args.spec, args.steps, args.warmup, args.top, dict(args.option))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
