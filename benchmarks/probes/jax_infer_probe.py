"""Where does JAX's batch-1 inference latency go: the host issuing the call, the synchronisation, or the GPU?

Diagnostic probe (not a benchmark): reads an inference run folder's ``spec.json`` (made by
``bench scenario run scenarios/imagenet_resnet50_inference.yaml``; its dataset and
``init.safetensors`` are used as they are), builds bench's own JAX workload for it once, and times
``--calls`` synchronised calls per variant, after ``--warmup`` calls:

- ``bench``: the engine's path as the harness drives it (``workload.step`` then ``workload.sync``,
  which blocks on the logits and on every leaf of the variables);
- ``sync_logits``: the same call, blocking on the logits only;
- ``packed``: the variables packed into one flat buffer per dtype (unpacked inside the compiled
  function), so the call passes a handful of arrays instead of every leaf, blocking on the logits.

Per variant one JSON line: latency per call (p50, p99, mean, ms), the host time until the call
returned (``dispatch``), the time spent blocking (``sync``), and ``pipelined_ms``: the time per call
of ``--calls`` calls issued back to back with one synchronisation at the end (close to the GPU's own
time per call when the host keeps ahead). Outputs of every variant are compared with ``bench``'s
(max abs difference). Run it as ``PYTHONPATH=images/common:images/jax python3 benchmarks/probes/jax_infer_probe.py SPEC``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from run_folder import build_jax_workload, read_spec


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3

    return {"p50": at(0.5), "p99": at(0.99), "mean": statistics.fmean(values) * 1e3}


def timed(call: Callable[[], Any], block: Callable[[Any], Any], calls: int, warmup: int) -> tuple[dict[str, Any], Any]:
    """Latency of ``calls`` synchronised calls, their dispatch and sync parts, and the pipelined time per call."""
    for _ in range(warmup):
        block(call())
    total, dispatch = [], []
    out = None
    for _ in range(calls):
        began = time.perf_counter()
        out = call()
        issued = time.perf_counter()
        block(out)
        ended = time.perf_counter()
        total.append(ended - began)
        dispatch.append(issued - began)
    began = time.perf_counter()
    for _ in range(calls):
        out = call()
    block(out)
    pipelined = (time.perf_counter() - began) / calls
    sync = [t - d for t, d in zip(total, dispatch, strict=True)]
    return {"latency_ms": percentiles(total), "dispatch_ms": percentiles(dispatch), "sync_ms": percentiles(sync),
            "pipelined_ms": pipelined * 1e3}, out


def packed_call(workload: Any, size: int) -> Callable[[], Any]:
    """The workload's inference step with its variables packed into one flat buffer per dtype."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    leaves, treedef = jax.tree.flatten(workload.state)
    dtypes = sorted({str(leaf.dtype) for leaf in leaves})
    layout = []  # (group, offset, shape) per leaf
    offsets = dict.fromkeys(dtypes, 0)
    for leaf in leaves:
        group = str(leaf.dtype)
        layout.append((dtypes.index(group), offsets[group], leaf.shape))
        offsets[group] += int(np.prod(leaf.shape))
    buffers = [jnp.concatenate([leaf.reshape(-1) for leaf in leaves if str(leaf.dtype) == d]) for d in dtypes]
    from dataclasses import replace

    from bench_jax.step import build_step

    config = replace(workload.step_config, size=size, steps=1)
    infer = build_step(workload.model, workload.tx, config).__wrapped__  # the engine's own (unjitted) inference function

    def unpacked(bufs: list[Any], data: Any, where: Any) -> Any:
        parts = [jax.lax.slice(bufs[g], (o,), (o + int(np.prod(s)),)).reshape(s) for g, o, s in layout]
        return infer(jax.tree.unflatten(treedef, parts), data, where)

    where = workload._on_device(np.int32(0))
    compiled = jax.jit(unpacked).lower(buffers, workload.data, where).compile()
    return lambda: compiled(buffers, workload.data, where)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="an inference run folder's spec.json")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    import jax
    import numpy as np

    from bench_engine.api import StepBatch

    spec = read_spec(args.spec)
    if spec.parity.mode != "infer" or spec.parity.devices != 1:
        print(f"error: {args.spec}: an inference spec on one device is needed", file=sys.stderr)
        return 2
    workload, _, devices, setup_s = build_jax_workload(spec)
    size = spec.parity.batch.global_
    batch = StepBatch(epoch=0, index=0, start=0, size=size)

    def bench_call() -> Any:
        workload.step(batch)
        return workload._last

    variants: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]] = {
        "bench": (bench_call, lambda _: workload.sync()),
        "sync_logits": (bench_call, jax.block_until_ready),
        "packed": (packed_call(workload, size), jax.block_until_ready),
    }
    reference = None
    for name, (call, block) in variants.items():
        figures, out = timed(call, block, args.calls, args.warmup)
        out = np.asarray(jax.device_get(out), dtype=np.float32)
        reference = out if reference is None else reference
        figures.update(variant=name, batch=size, precision=spec.parity.precision, device=str(devices[0].device_kind),
                       jax=jax.__version__, setup_s=round(setup_s, 1), leaves=len(jax.tree.leaves(workload.state)),
                       max_abs_diff_vs_bench=float(np.max(np.abs(out - reference))))
        print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
