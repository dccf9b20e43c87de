"""Where a training step's GPU time goes: per-kernel-class totals of the engines' optimized steps.

Usage: python3 benchmarks/kernel_profile.py pytorch|jax [--size 224] [--batch 256] [--precision bf16]
       [--steps 10] [--top 15]

Builds the engine's own model and optimized train step on synthetic data of the scenario's geometry,
warms it up (compilation, autotuning), then profiles ``--steps`` steps and prints, per kernel class
(convolution, GEMM, normalisation/elementwise fusions, optimizer, other), the GPU time per step,
its share, the kernel launches per step, and the top kernels by time. PyTorch is profiled with
torch.profiler (compiled model, no CUDA graph, so every kernel is visible); JAX with the
number of launches read from the compiled HLO (convolution custom calls, fusions, copies) and a
timed step, because JAX's profiler output needs TensorBoard tooling to read.

A report, not a test: it needs a CUDA GPU and prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "probes"))
from step_profile import classify  # noqa: E402  (one kernel classification for both profilers)


def profile_pytorch(size: int, batch: int, precision: str, steps: int, top: int) -> dict[str, Any]:
    sys.path[:0] = [str(REPO / "images" / "common"), str(REPO / "images" / "pytorch")]
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench_pytorch.model import build_model
    from bench_pytorch.precision import apply_precision

    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    policy = apply_precision(precision, device, training=True)
    model = build_model("resnet50_v1.5", 1000 if size >= 128 else 10).to(device).to(memory_format=torch.channels_last)
    forward = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, fused=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    images = torch.randn(batch, 3, size, size, device=device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (batch,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with policy.autocast():
            loss = loss_fn(forward(images), labels)
        loss.backward()
        optimizer.step()

    started = time.perf_counter()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - started) / steps
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type.name == "CUDA":
            entry = kernels[event.name]
            entry[0] += event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time_total
            entry[1] += 1
    return summarise("pytorch", size, batch, precision, steps, wall, warm_s, kernels, top)


def summarise(engine: str, size: int, batch: int, precision: str, steps: int, wall: float, warm_s: float,
              kernels: dict[str, list[float]], top: int) -> dict[str, Any]:
    total_us = sum(v[0] for v in kernels.values())
    classes: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for name, (us, count) in kernels.items():
        entry = classes[classify(name)]
        entry[0] += us
        entry[1] += count
    return {
        "engine": engine, "geometry": f"{size}x{size}", "batch": batch, "precision": precision,
        "step_wall_ms": wall * 1e3, "images_per_s": batch / wall, "warmup_s": warm_s,
        "gpu_busy_ms_per_step": total_us / steps / 1e3,
        "launches_per_step": sum(v[1] for v in kernels.values()) / steps,
        "classes": {label: {"ms_per_step": us / steps / 1e3, "share": us / total_us if total_us else 0.0,
                            "launches_per_step": count / steps}
                    for label, (us, count) in sorted(classes.items(), key=lambda kv: -kv[1][0])},
        "top_kernels": [{"name": name[:110], "ms_per_step": us / steps / 1e3, "calls_per_step": count / steps}
                        for name, (us, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:top]],
    }


def profile_jax(size: int, batch: int, precision: str, steps: int, top: int) -> dict[str, Any]:
    sys.path[:0] = [str(REPO / "images" / "common"), str(REPO / "images" / "jax")]
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from bench_jax.model import build_model
    from bench_jax.step import StepConfig, TrainState, build_step

    dtype = jnp.bfloat16 if precision == "bf16" else jnp.float32
    model = build_model("resnet50_v1.5", 1000 if size >= 128 else 10, dtype=dtype, param_dtype=jnp.float32, precision=None)
    variables = jax.jit(lambda k: model.init(k, jnp.zeros((1, size, size, 3)), train=False))(jax.random.PRNGKey(0))
    tx = optax.chain(optax.add_decayed_weights(5e-5), optax.sgd(0.1, momentum=0.9))
    state = TrainState(variables["params"], variables["batch_stats"], jax.jit(tx.init)(variables["params"]))
    images = jax.device_put(np.random.default_rng(0).standard_normal((batch, size, size, 3), dtype=np.float32))
    labels = jax.device_put(np.zeros((batch,), np.int32))
    config = StepConfig(mode="train", full_step=True, donate=True, device_data=False, size=batch)
    step = build_step(model, tx, config)
    lowered = step.lower(state, (images, labels), None)
    started = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - started
    hlo = compiled.as_text()
    counts = {
        "convolution_custom_calls": len(re.findall(r'custom_call_target="__cudnn\$conv', hlo)),
        "gemm_custom_calls": len(re.findall(r'custom_call_target="__cublas', hlo)),
        "fusions": len(re.findall(r"^\s*\S+ = \S+ fusion\(", hlo, re.M)),
        "copies": len(re.findall(r"^\s*\S+ = \S+ copy\(", hlo, re.M)),
        "command_buffers": len(re.findall(r"command_buffer", hlo)),
    }
    for _ in range(5):
        state, loss = compiled(state, (images, labels), None)
    jax.block_until_ready(loss)
    started = time.perf_counter()
    for _ in range(steps):
        state, loss = compiled(state, (images, labels), None)
    jax.block_until_ready(loss)
    wall = (time.perf_counter() - started) / steps
    return {"engine": "jax", "geometry": f"{size}x{size}", "batch": batch, "precision": precision,
            "step_wall_ms": wall * 1e3, "images_per_s": batch / wall, "compile_s": compile_s, "hlo_counts": counts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=("pytorch", "jax"))
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--precision", default="bf16", choices=("fp32", "tf32", "bf16"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    run = profile_pytorch if args.engine == "pytorch" else profile_jax
    print(json.dumps(run(args.size, args.batch, args.precision, args.steps, args.top), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
