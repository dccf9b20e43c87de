"""FLOPs next to measured speed: achieved TFLOP/s and, on a known GPU, the fraction of its peak."""

from __future__ import annotations

from typing import NamedTuple

from bench_engine.contract import EngineResult
from orchestrator.model.layers import flops_per_sample, forward_macs

# Dense tensor-core / vector peaks in TFLOP/s by precision (vendor data sheets, SXM parts, no sparsity).
GPU_PEAKS: dict[str, dict[str, float]] = {
    "H200": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "H100": {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.1, "fp16": 362.1},
    "V100": {"fp32": 15.7, "tf32": 15.7, "fp16": 125.0},
}


def peak_tflops(device_name: str | None, precision: str) -> float | None:
    """The GPU's dense peak for ``precision`` when bench knows the GPU (matched by model name)."""
    if not device_name:
        return None
    upper = device_name.upper()
    for model, peaks in GPU_PEAKS.items():
        if model in upper:
            return peaks.get(precision)
    return None


class Utilisation(NamedTuple):
    """How much of the device a run used: MACs and FLOPs per sample, achieved TFLOP/s and fraction of the GPU's peak."""

    gmacs_per_sample: float | None = None
    flops_per_sample: float | None = None
    achieved_tflops: float | None = None
    peak_fraction: float | None = None


def utilisation(result: EngineResult | None, throughput: float | None) -> Utilisation:
    """MACs and FLOPs per sample of the run's model and geometry, achieved TFLOP/s, fraction of peak."""
    work = (result.work if result is not None else None) or {}
    if not work.get("input_shape"):
        return Utilisation()
    height, width, channels = work["input_shape"]
    macs = forward_macs(work["arch"], work["num_classes"], channels, height, width)
    flops = flops_per_sample(work["arch"], work["num_classes"], channels, height, width, work["mode"])
    achieved = throughput * flops / 1e12 if throughput and flops else None
    environment = result.environment if result is not None else {}
    device = environment["devices"][0] if environment.get("device_kind") == "cuda" and environment.get("devices") else None
    peak = peak_tflops(device, work["precision"]["name"])
    return Utilisation(macs / 1e9 if macs else None, flops, achieved, achieved / peak if achieved and peak else None)
