"""Proof that PyTorch's optimized path captures its whole step for every optimizer and precision.

Usage: python3 benchmarks/pytorch_graph_matrix.py [--device cuda] [--batch 128] [--steps 20]
       [--optimizers sgd,adam] [--precisions tf32,bf16,fp16] [--option fused_optimizer=false ...] [--sgd-lr 0.1]

For each optimizer x precision it builds the engine's own workload (``bench_pytorch.workload.
build_workload``: model, precision policy, optimizer, step, CUDA-graph runner) for ResNet-50 v1.5
at CIFAR geometry (32x32x3, 10 classes, random data on the device), runs the warmup steps, the
capture and ``--steps`` replays, and prints one row: graph captured, optimizer class, fused,
capturable, steps/s of the replays, loss finite. Exit 1 if any combination did not capture (or
failed). ``compile`` follows the engine (auto: on CUDA, so each row compiles first, about a
minute on an H200). ``--device cpu`` runs the same rows eagerly (fp32/bf16 only; nothing is captured,
so nothing fails for it): a check of the script, not of the claim.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "images" / "common"), str(REPO / "images" / "pytorch")]

OPTIMIZERS: dict[str, dict[str, Any]] = {
    "sgd": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-5, "nesterov": False},
    "adam": {"name": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1.1920928955078125e-07, "weight_decay": 0.0},
}
SAMPLES_BATCHES = 4  # the random split holds this many batches; steps cycle over them


@dataclass(frozen=True)
class Row:
    optimizer: str
    precision: str
    captured: bool
    optimizer_class: str = "-"
    fused: bool | None = None
    capturable: bool | None = None
    steps_per_s: float = 0.0
    loss_finite: bool = False
    loss: float | None = None
    note: str = ""


def spec_for(optimizer: str, precision: str, batch: int, options: dict[str, Any], device: str, lr: float | None = None) -> Any:
    """The run spec ``build_workload`` reads (one device, the optimized path), a ``bench_engine.contract.RunSpec``."""
    from bench_engine.contract import RunSpec

    samples = batch * SAMPLES_BATCHES
    return RunSpec.from_json({
        "schema_version": 1, "run_id": f"graph-{optimizer}-{precision}", "scenario": "pytorch_graph_matrix", "engine": "pytorch",
        "path": "optimized", "device": device, "smoke": False, "repeat": 1, "engine_options": options,
        "parity": {
            "mode": "train", "model": {"arch": "resnet50_v1.5", "num_classes": 10},
            "input": {"height": 32, "width": 32, "channels": 3},
            "dataset": {"name": "random", "path": "", "sha256": "random", "samples": samples, "split": "train"},
            "batch": {"per_device": batch, "global": batch, "drop_last": True}, "devices": 1, "epochs": 1,
            "steps_per_epoch": SAMPLES_BATCHES, "total_steps": SAMPLES_BATCHES,
            "optimizer": {**OPTIMIZERS[optimizer], **({"lr": lr} if lr is not None else {})}, "loss": "cross_entropy",
            "precision": precision, "seed": 0, "warmup_steps": 8, "data_placement": "device", "init": {"mode": "framework"},
        },
        "measurement": {"window_steps": 1, "timeout_s": 900, "max_step_samples": 10000},
        "expected": {"trainable_parameters": None},
    })


def run_one(optimizer: str, precision: str, args: argparse.Namespace, options: dict[str, Any]) -> Row:
    import numpy as np
    import torch

    from bench_engine.api import StepBatch
    from bench_engine.data import Dataset
    from bench_pytorch.step import GraphRunner
    from bench_pytorch.workload import build_workload

    spec = spec_for(optimizer, precision, args.batch, options, args.device, args.sgd_lr if optimizer == "sgd" else None)
    rng = np.random.default_rng(0)
    samples = spec.parity.dataset.samples
    data = Dataset(rng.integers(0, 256, (samples, 32, 32, 3), dtype=np.uint8),
                   rng.integers(0, 10, samples).astype(np.int32), "random")
    device = torch.device(args.device)
    torch._dynamo.reset()
    workload = build_workload(spec, data, device)
    try:
        runner = workload.runner
        warmup = runner.warmup_left + 1 if isinstance(runner, GraphRunner) else 2  # side-stream steps, then the capture

        def step(index: int) -> None:
            start = (index % SAMPLES_BATCHES) * args.batch
            workload.step(StepBatch(epoch=1, index=index, start=start, size=args.batch))

        for index in range(warmup):
            step(index)
        workload.sync()
        started = time.perf_counter()
        for index in range(warmup, warmup + args.steps):
            step(index)
        workload.sync()
        rate = args.steps / (time.perf_counter() - started)
        loss = workload.loss()
        captured = isinstance(runner, GraphRunner) and runner.graph is not None
        read = workload.readback.optimizer
        note = "" if captured else workload.optimizations["cuda_graphs"].detail
        return Row(optimizer, precision, captured, read.class_.rsplit(".", 1)[-1], read.fused, read.capturable,
                   rate, loss is not None and math.isfinite(loss), loss, note)
    finally:
        workload.close()


def parse_options(items: list[str]) -> dict[str, Any]:
    """``key=value`` engine options; true/false become booleans."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--option: expected key=value, got {item!r}")
        options[key] = {"true": True, "false": False}.get(value.lower(), value)
    return options


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20, help="timed replays after the capture")
    parser.add_argument("--optimizers", default="sgd,adam")
    parser.add_argument("--precisions", default=None, help="default: tf32,bf16,fp16 (cuda), fp32,bf16 (cpu)")
    parser.add_argument("--option", action="append", default=[], help="engine option key=value (repeatable)")
    parser.add_argument("--sgd-lr", type=float, default=None, help=f"SGD's learning rate (default {OPTIMIZERS['sgd']['lr']})")
    args = parser.parse_args()
    options = parse_options(args.option)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_graph_matrix: no CUDA device (torch.cuda.is_available() is False); this proof needs one "
              "(--device cpu only checks the script)", file=sys.stderr)
        return 2
    precisions = (args.precisions or ("tf32,bf16,fp16" if args.device == "cuda" else "fp32,bf16")).split(",")
    warnings.filterwarnings("ignore", category=UserWarning)
    rows: list[Row] = []
    for optimizer in args.optimizers.split(","):
        for precision in precisions:
            try:
                rows.append(run_one(optimizer, precision, args, options))
            except Exception as exc:  # a row per combination: a failure is reported, the others still run
                rows.append(Row(optimizer, precision, False, note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
            row = rows[-1]
            print(f"{row.optimizer:<5} {row.precision:<5} captured={'yes' if row.captured else 'no':<3} "
                  f"{row.optimizer_class:<5} fused={row.fused!s:<5} capturable={row.capturable!s:<5} "
                  f"{row.steps_per_s:8.1f} steps/s ({row.steps_per_s * args.batch:9.0f} img/s) "
                  f"loss_finite={'yes' if row.loss_finite else 'no'} loss={row.loss if row.loss is not None else '-'}"
                  f"{'  ' + row.note if row.note else ''}", flush=True)
    if args.device == "cpu":
        return 0 if all(row.loss_finite for row in rows) else 1
    failed = [f"{row.optimizer}/{row.precision}" for row in rows if not (row.captured and row.loss_finite)]
    if failed:
        print(f"not captured or not finite: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(rows)} combinations captured", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
