"""Is JAX's optimized train step bound by host launches, and which XLA command-buffer setting removes them?

Diagnostic probe (not a benchmark): reads a run folder's ``spec.json`` (made by ``bench scenario
run``; its dataset and ``init.safetensors`` are used as they are) and, for every ``--variant
NAME=XLA_FLAGS``, starts a fresh Python (XLA reads its flags once, at start) that builds bench's own
JAX workload for the spec (the engine's options, ``steps_per_dispatch`` included, changed per variant
by ``--option NAME:KEY=VALUE``, VALUE as JSON) and times
``--windows`` windows of ``--steps`` training steps after a warmup, synchronised at both ends.

Per variant it prints one JSON line: the step time and img/s of each window (median and range), the
host time spent issuing the window's calls (``enqueue``: close to the whole window when the host,
not the GPU, sets the pace), the last losses (finite or not), setup seconds, and, read from XLA's
own log of its command-buffer conversion (``TF_CPP_VMODULE=command_buffer_conversion_pass=2``), the
thunk kinds it left outside command buffers and why.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from run_folder import build_jax_workload, read_spec, with_options

LOG_PATTERNS = {
    "unsupported": re.compile(r"Unsupported thunk kind: (\w+)"),
    "not_enabled": re.compile(r"Thunk kind (\w+) lowering is not enabled by the user for type (\w+)"),
    "removed": re.compile(r"Removed command buffer support for (\w+)"),
    "while_not_convertible": re.compile(r"(WhileThunk is not convertible[^\n]*)"),
}


def child(spec_path: Path, steps: int, windows: int, warmup: int, options: dict[str, Any]) -> dict[str, Any]:
    """In the fresh process: build the workload and time it."""
    import jax
    import numpy as np

    from bench_engine.api import StepBatch

    spec = with_options(read_spec(spec_path), options)
    workload, _, devices, setup_s = build_jax_workload(spec)
    batch = spec.parity.batch.global_
    per_epoch = spec.parity.steps_per_epoch
    k = workload.steps_per_dispatch
    steps = max(k, steps - steps % k)  # whole calls only: no short queue inside a window
    counter = 0

    def run(n: int) -> float:
        nonlocal counter
        started = time.perf_counter()
        for _ in range(n):
            index = counter % per_epoch
            if index + k > per_epoch:  # keep every call inside one epoch, as the harness does
                counter += per_epoch - index
                index = 0
            workload.step(StepBatch(epoch=counter // per_epoch, index=index, start=index * batch, size=batch))
            counter += 1
        return time.perf_counter() - started

    run(warmup - warmup % k or k)
    workload.sync()
    window_s, enqueue_s = [], []
    for _ in range(windows):
        started = time.perf_counter()
        enqueue_s.append(run(steps))
        workload.sync()
        window_s.append(time.perf_counter() - started)
    losses = [float(v) for v in np.atleast_1d(np.asarray(workload._last, dtype=np.float64))]
    rates = [batch * steps / s for s in window_s]
    return {"setup_s": round(setup_s, 1), "steps_per_dispatch": k, "steps_per_window": steps,
            "img_per_s": [round(r) for r in rates], "img_per_s_median": round(statistics.median(rates)),
            "step_ms_median": round(statistics.median(window_s) / steps * 1e3, 3),
            "enqueue_share_median": round(statistics.median(e / w for e, w in zip(enqueue_s, window_s, strict=True)), 3),
            "last_losses": [round(v, 4) for v in losses[-3:]], "finite": bool(np.all(np.isfinite(losses))),
            "engine_options": dict(spec.engine_options), "jax": jax.__version__, "device": str(devices[0].device_kind),
            "xla_flags_in_effect": os.environ.get("XLA_FLAGS", "")}


def conversion_log(stderr: str) -> dict[str, Any]:
    """What XLA's command-buffer conversion left out (counts per thunk kind / reason)."""
    found: dict[str, Any] = {}
    for name, pattern in LOG_PATTERNS.items():
        hits = Counter(" ".join(m) if isinstance(m, tuple) else m for m in pattern.findall(stderr))
        if hits:
            found[name] = dict(hits.most_common(12))
    return found


def parent(args: argparse.Namespace) -> int:
    for item in args.variant or ["defaults="]:
        name, _, flags = item.partition("=")
        env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip(),
               "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "command_buffer_conversion_pass=2"}
        options = {key: json.loads(value) for key, value in
                   (o.split(":", 1)[1].split("=", 1) for o in args.option or [] if o.split(":", 1)[0] == name)}
        command = [sys.executable, __file__, str(args.spec), "--child", "--steps", str(args.steps),
                   "--windows", str(args.windows), "--warmup", str(args.warmup), "--options-json", json.dumps(options)]
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
        line: dict[str, Any] = {"variant": name, "xla_flags": flags, "rc": done.returncode,
                                "wall_s": round(time.perf_counter() - started, 1)}
        result = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        line.update(json.loads(result[-1]) if result else {"error": done.stderr.strip().splitlines()[-3:]})
        line["conversion"] = conversion_log(done.stderr)
        print(json.dumps(line), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="a run folder's spec.json")
    parser.add_argument("--variant", action="append", help="NAME=XLA_FLAGS (repeatable; default: XLA's defaults)")
    parser.add_argument("--steps", type=int, default=200, help="training steps per timed window")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per variant")
    parser.add_argument("--option", action="append", help="NAME:KEY=VALUE: an engine option of variant NAME (VALUE as JSON)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--options-json", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.spec, args.steps, args.windows, args.warmup, json.loads(args.options_json))), flush=True)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
